@testable import Bridge
import Testing

/// The consumer's wait at the in-flight limit, in simulated time: scripted readings of the
/// in-flight work and a clock that advances by one millisecond per sleep.
@Suite struct BackpressureWaitTests {
    /// Readings returned in order; the last one repeats.
    final class Readings {
        private var values: [Int]
        private(set) var taken = 0
        init(_ values: [Int]) { self.values = values }
        func next() -> Int {
            defer { taken += 1 }
            return values[min(taken, values.count - 1)]
        }
    }

    final class Clock {
        var nanoseconds: UInt64 = 1_000_000_000
        func sleep() { nanoseconds += 1_000_000 }
    }

    let wait = BackpressureWait(limit: 100, graceNanoseconds: 50_000_000)

    @Test func roomSeenOnceEndsTheWaitWhateverALaterReadingSays() {
        // 100, 100, then 99 (room), then a reading above the limit, as two counters read a
        // moment apart can give while work moves between them: the wait ends with room.
        let readings = Readings([100, 100, 99, 105])
        let clock = Clock()
        let outcome = wait.wait(now: { clock.nanoseconds }, inFlight: readings.next, shouldStop: { false }, sleep: clock.sleep)
        #expect(outcome == .room)
        #expect(readings.taken == 3)
    }

    @Test func workAtTheLimitForTheWholeGracePauses() {
        let readings = Readings([100])
        let clock = Clock()
        let start = clock.nanoseconds
        let outcome = wait.wait(now: { clock.nanoseconds }, inFlight: readings.next, shouldStop: { false }, sleep: clock.sleep)
        #expect(outcome == .pause)
        #expect(clock.nanoseconds - start == 50_000_000)
    }

    @Test func roomJustBeforeTheDeadlineDoesNotPause() {
        let readings = Readings(Array(repeating: 120, count: 50) + [0])
        let clock = Clock()
        let outcome = wait.wait(now: { clock.nanoseconds }, inFlight: readings.next, shouldStop: { false }, sleep: clock.sleep)
        #expect(outcome == .room)
    }

    @Test func aStopEndsTheWaitWithoutPausing() {
        let readings = Readings([100])
        let clock = Clock()
        var polls = 0
        let outcome = wait.wait(now: { clock.nanoseconds }, inFlight: readings.next, shouldStop: {
            polls += 1
            return polls > 3
        }, sleep: clock.sleep)
        #expect(outcome == .stopped)
        #expect(clock.nanoseconds == 1_003_000_000)
    }

    @Test func noGraceMeansPausingAtOnce() {
        let readings = Readings([100])
        let clock = Clock()
        let outcome = BackpressureWait(limit: 100, graceNanoseconds: 0)
            .wait(now: { clock.nanoseconds }, inFlight: readings.next, shouldStop: { false }, sleep: clock.sleep)
        #expect(outcome == .pause)
        #expect(clock.nanoseconds == 1_000_000_000)
    }
}
