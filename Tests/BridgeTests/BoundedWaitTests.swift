@testable import Bridge
import Testing

/// The consumer thread's bounded waits (the revocation's wait for the leaving partitions' work,
/// the in-flight limit's grace) in simulated time: a clock that advances by one millisecond per
/// sleep.
@Suite struct BoundedWaitTests {
    final class Clock {
        var nanoseconds: UInt64 = 5_000_000_000
        private(set) var sleeps = 0
        func sleep() {
            sleeps += 1
            nanoseconds += 1_000_000
        }
    }

    @Test func aConditionThatHoldsEndsTheWaitAtOnceEvenWithNoTimeToWait() {
        let clock = Clock()
        let outcome = BoundedWait(timeoutNanoseconds: 0).wait(
            now: { clock.nanoseconds }, until: { true }, shouldStop: { false }, sleep: clock.sleep)
        #expect(outcome == .done)
        #expect(clock.sleeps == 0)
    }

    @Test func aConditionThatComesTrueEndsTheWaitThen() {
        let clock = Clock()
        let start = clock.nanoseconds
        let outcome = BoundedWait(timeoutNanoseconds: 50_000_000).wait(
            now: { clock.nanoseconds }, until: { clock.nanoseconds - start >= 20_000_000 }, shouldStop: { false },
            sleep: clock.sleep)
        #expect(outcome == .done)
        #expect(clock.sleeps == 20)
    }

    @Test func aConditionThatNeverHoldsEndsAtTheDeadline() {
        let clock = Clock()
        let outcome = BoundedWait(timeoutNanoseconds: 50_000_000).wait(
            now: { clock.nanoseconds }, until: { false }, shouldStop: { false }, sleep: clock.sleep)
        #expect(outcome == .timedOut)
        #expect(clock.sleeps == 50)
    }

    @Test func aStopEndsTheWaitBeforeTheDeadline() {
        let clock = Clock()
        let outcome = BoundedWait(timeoutNanoseconds: 50_000_000).wait(
            now: { clock.nanoseconds }, until: { false }, shouldStop: { clock.sleeps >= 3 }, sleep: clock.sleep)
        #expect(outcome == .stopped)
        #expect(clock.sleeps == 3)
    }

    /// The revocation waits `shutdown_timeout`, and at most half of `max.poll.interval.ms` (the
    /// consumer does not poll while it waits) and half of `session.timeout.ms`.
    @Test func theRevocationWaitsTheShutdownTimeoutAndAtMostHalfThePollIntervalAndTheSession() throws {
        func drain(_ extra: String) throws -> UInt64 {
            let yaml = """
            kafka:
              brokers: k1:9092
            \(extra)
            apps:
              - name: chat
                bundle_id: com.example.chat
                auth: {type: token, key_file: key.p8, key_id: ABC123DEFG, team_id: TEAM123456}
            """
            return BridgePipeline.revocationDrainNanoseconds(try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        }
        #expect(try drain("") == 22_500_000_000)  // librdkafka's session.timeout.ms: 45 s
        #expect(try drain("shutdown_timeout: 2s") == 2_000_000_000)
        #expect(try drain("  consumer: {max.poll.interval.ms: 20000}") == 10_000_000_000)
        #expect(try drain("  consumer: {session.timeout.ms: 6000}") == 3_000_000_000)
        #expect(try drain("  consumer: {max.poll.interval.ms: \"120000\", session.timeout.ms: 300000}\nshutdown_timeout: 90s")
                == 60_000_000_000)
    }

    /// The hand-over's commit ends with the hand-over's bound, and has at least a second of its
    /// own when the drain used (nearly) all of it.
    @Test func theHandOversCommitEndsWithTheBoundAndHasAtLeastASecond() {
        let second: UInt64 = 1_000_000_000
        #expect(BridgePipeline.handOverCommitDeadline(100 * second, now: 90 * second) == 100 * second)
        #expect(BridgePipeline.handOverCommitDeadline(100 * second, now: 99 * second + 1) == 100 * second + 1)
        #expect(BridgePipeline.handOverCommitDeadline(100 * second, now: 120 * second) == 121 * second)
    }
}
