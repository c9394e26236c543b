/// The consumer's wait at `limits.max_in_flight`: it stops taking records and waits for the work
/// to drain below the limit, for up to a grace period; only a grace that runs out with the work
/// still at the limit means pausing the partitions (which costs librdkafka's prefetched records).
///
/// One reading of the in-flight work decides each step. Exactly-once mode adds two counters
/// (notifications waiting for APNs, outputs waiting for their transaction) that other threads
/// move work between, so two readings a moment apart can disagree; deciding to pause on a second
/// reading taken after the first had seen room paused a healthy pipeline.
struct BackpressureWait {
    /// The in-flight limit.
    let limit: Int
    /// How long to wait for room before pausing.
    let graceNanoseconds: UInt64

    /// How a wait ended.
    enum Outcome: Equatable {
        /// The work fell below the limit.
        case room
        /// The grace ran out with the work still at the limit: pause fetching.
        case pause
        /// `shouldStop` said so (stop requested, fatal error).
        case stopped
    }

    /// Waits until `inFlight()` is below the limit, the grace has passed (by `now()`, in
    /// nanoseconds) or `shouldStop()`; `sleep()` runs between readings.
    func wait(
        now: () -> UInt64, inFlight: () -> Int, shouldStop: () -> Bool, sleep: () -> Void
    ) -> Outcome {
        let wait = BoundedWait(timeoutNanoseconds: graceNanoseconds)
        switch wait.wait(now: now, until: { inFlight() < limit }, shouldStop: shouldStop, sleep: sleep) {
        case .done: return .room
        case .timedOut: return .pause
        case .stopped: return .stopped
        }
    }
}
