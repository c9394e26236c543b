/// A wait on the consumer thread (or the one-shot `send`'s) for a condition that other threads
/// make true (work draining through APNs and Kafka's acknowledgements), read again between short
/// sleeps, until it holds, a deadline passes or the pipeline stops. The clock and the sleep are
/// injected: the rules run in simulated time in the tests.
struct BoundedWait {
    /// How long to wait at most.
    let timeoutNanoseconds: UInt64

    /// How a wait ended.
    enum Outcome: Equatable {
        /// The condition held.
        case done
        /// The deadline passed with the condition still false.
        case timedOut
        /// `shouldStop` said so (stop requested, fatal error).
        case stopped
    }

    /// Waits until `condition()` holds, `timeoutNanoseconds` have passed (by `now()`) or
    /// `shouldStop()`; `sleep()` runs between readings. The condition is read first: a wait for
    /// what already holds returns at once, also with a deadline of zero.
    func wait(
        now: () -> UInt64, until condition: () -> Bool, shouldStop: () -> Bool, sleep: () -> Void
    ) -> Outcome {
        let deadline = now() &+ timeoutNanoseconds
        while true {
            if condition() { return .done }
            if shouldStop() { return .stopped }
            if now() >= deadline { return .timedOut }
            sleep()
        }
    }
}
