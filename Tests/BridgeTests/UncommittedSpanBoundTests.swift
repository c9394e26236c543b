@testable import Bridge
import Testing

/// The uncommitted-span bound's decisions, in simulated time: partitions are numbers, what each
/// holds is given, and the clock is whatever the test says.
@Suite struct UncommittedSpanBoundTests {
    static let second: UInt64 = 1_000_000_000

    /// Exactly once: bound 100 over two partitions (a share of 50), a grace of one second.
    static func exactlyOnce() -> UncommittedSpanBound<Int> {
        UncommittedSpanBound(bound: 100, graceNanoseconds: second, pausedPartitionsLeaveTheSum: true)
    }

    @Test func aPartitionOverItsShareIsPausedOnlyOnceTheGraceHasPassed() {
        var bound = Self.exactlyOnce()
        let spans = [0: 120, 1: 0]
        #expect(bound.decide(spans: spans, paused: [], now: 10 * Self.second).pause.isEmpty)
        #expect(bound.decide(spans: spans, paused: [], now: 10 * Self.second + Self.second / 2).pause.isEmpty)
        let decision = bound.decide(spans: spans, paused: [], now: 11 * Self.second)
        #expect(decision.pause.map(\.partition) == [0])
        #expect(decision.pause.map(\.span) == [120])
        #expect(decision.resume.isEmpty)
    }

    /// A slow record holds the outputs behind it for a moment, then lets them go: the grace
    /// starts again the next time, so holds shorter than the grace never pause the partition.
    @Test func holdsBrokenByAMomentUnderTheBoundNeverAddUpToAPause() {
        var bound = Self.exactlyOnce()
        var now = 10 * Self.second
        for _ in 0..<20 {
            #expect(bound.decide(spans: [0: 150, 1: 10], paused: [], now: now).pause.isEmpty)
            now += Self.second * 9 / 10
            #expect(bound.decide(spans: [0: 5, 1: 10], paused: [], now: now).pause.isEmpty)
            #expect(bound.overSince.isEmpty)
            now += Self.second / 100
        }
    }

    @Test func withoutGraceAPartitionOverItsShareIsPausedAtOnce() {
        var bound = UncommittedSpanBound<Int>(bound: 100, graceNanoseconds: 0, pausedPartitionsLeaveTheSum: false)
        #expect(bound.decide(spans: [0: 101, 1: 0], paused: [], now: 5).pause.map(\.partition) == [0])
    }

    /// Only a partition holding its share or more is paused: one over the bound with another
    /// holding little pauses the first alone.
    @Test func onlyPartitionsHoldingTheirShareArePaused() {
        var bound = UncommittedSpanBound<Int>(bound: 100, graceNanoseconds: 0, pausedPartitionsLeaveTheSum: false)
        let decision = bound.decide(spans: [0: 30, 1: 60, 2: 40], paused: [], now: 5)
        #expect(Set(decision.pause.map(\.partition)) == [1, 2])
    }

    /// A paused partition resumes when all of them hold half the bound or less, or when it holds
    /// half its share or less (it was paused along with a stuck one, not for one of its own).
    @Test func aPausedPartitionResumesOnTheSumOrOnItsOwnHold() {
        var bound = Self.exactlyOnce()
        // Share 50: partition 0 holds 60 of its own, partition 1 has let its go to 20.
        var decision = bound.decide(spans: [0: 60, 1: 20], paused: [0, 1], now: 1)
        #expect(decision.resume == [1])
        // Together at half the bound: both resume.
        decision = bound.decide(spans: [0: 40, 1: 10], paused: [0, 1], now: 2)
        #expect(Set(decision.resume) == [0, 1])
        // Still above both: neither.
        decision = bound.decide(spans: [0: 60, 1: 30], paused: [0, 1], now: 3)
        #expect(decision.resume.isEmpty)
    }

    /// Exactly once what a paused partition holds is left out of the sum: the stuck one stays
    /// paused with its hold while the other's brief holds, under the bound, pause nothing.
    @Test func exactlyOnceAPausedPartitionsHoldDoesNotPauseTheOthers() {
        var bound = UncommittedSpanBound<Int>(bound: 100, graceNanoseconds: 0, pausedPartitionsLeaveTheSum: true)
        let decision = bound.decide(spans: [0: 90, 1: 60], paused: [0], now: 1)
        #expect(decision.pause.isEmpty)
        #expect(decision.resume.isEmpty)
        // At least once the sum bounds memory, paused or not: the other one is paused too.
        var memoryBound = UncommittedSpanBound<Int>(bound: 100, graceNanoseconds: 0, pausedPartitionsLeaveTheSum: false)
        #expect(memoryBound.decide(spans: [0: 90, 1: 60], paused: [0], now: 1).pause.map(\.partition) == [1])
    }

    /// A partition revoked and assigned again between two decisions (both inside one poll) is
    /// forgotten by the revocation: its grace starts anew.
    @Test func aPartitionForgottenAtItsRevocationStartsItsGraceAnew() {
        var bound = Self.exactlyOnce()
        #expect(bound.decide(spans: [0: 120, 1: 0], paused: [], now: 0).pause.isEmpty)
        bound.forget([0])
        #expect(bound.overSince.isEmpty)
        #expect(bound.decide(spans: [0: 120, 1: 0], paused: [], now: 2 * Self.second).pause.isEmpty)
        #expect(bound.decide(spans: [0: 120, 1: 0], paused: [], now: 3 * Self.second).pause.map(\.partition) == [0])
    }

    /// A partition that leaves the assignment while its grace runs is forgotten: assigned again,
    /// its grace starts anew.
    @Test func aRevokedPartitionsGraceIsForgotten() {
        var bound = Self.exactlyOnce()
        #expect(bound.decide(spans: [0: 120, 1: 0], paused: [], now: 0).pause.isEmpty)
        #expect(bound.decide(spans: [1: 0], paused: [], now: Self.second / 2).pause.isEmpty)
        #expect(bound.overSince.isEmpty)
        #expect(bound.decide(spans: [0: 120, 1: 0], paused: [], now: Self.second).pause.isEmpty)
        #expect(bound.decide(spans: [0: 120, 1: 0], paused: [], now: 2 * Self.second).pause.map(\.partition) == [0])
    }
}
