import Testing
@testable import APNs

@Suite struct APNsBackoffTests {
    let backoff = APNsBackoff(initial: .milliseconds(100), maximum: .seconds(30))

    @Test func ceilingDoublesFromInitialToTheCap() {
        #expect(backoff.ceilingNanoseconds(attempt: 1) == 100 * millisecond)
        #expect(backoff.ceilingNanoseconds(attempt: 2) == 200 * millisecond)
        #expect(backoff.ceilingNanoseconds(attempt: 9) == 25_600 * millisecond)
        #expect(backoff.ceilingNanoseconds(attempt: 10) == 30 * second)
        #expect(backoff.ceilingNanoseconds(attempt: 10_000) == 30 * second)   // no overflow
    }

    @Test func fullJitterStaysWithinZeroAndTheCeilingAndSpreads() {
        let jitter = seededJitter(42)
        for attempt in 1...20 {
            let ceiling = backoff.ceilingNanoseconds(attempt: attempt)
            var lowest = Int64.max, highest = Int64.min
            for _ in 0..<2_000 {
                let delay = backoff.fullJitterNanoseconds(attempt: attempt, jitter: jitter)
                #expect(delay >= 0 && delay <= ceiling)
                lowest = min(lowest, delay)
                highest = max(highest, delay)
            }
            // Full jitter uses the whole range, not a band near the ceiling.
            #expect(lowest < ceiling / 10 && highest > ceiling * 9 / 10)
        }
        #expect(backoff.fullJitterNanoseconds(attempt: 3, jitter: fixedJitter(0)) == 0)
        #expect(backoff.fullJitterNanoseconds(attempt: 3, jitter: fixedJitter(1)) <= 400 * millisecond)
    }

    @Test func equalJitterNeverGoesBelowHalfTheCeiling() {
        let jitter = seededJitter(7)
        for attempt in 1...20 {
            let ceiling = backoff.ceilingNanoseconds(attempt: attempt)
            for _ in 0..<500 {
                let delay = backoff.equalJitterNanoseconds(attempt: attempt, jitter: jitter)
                #expect(delay >= ceiling / 2 && delay <= ceiling)
            }
        }
        #expect(backoff.equalJitterNanoseconds(attempt: 1, jitter: fixedJitter(0)) == 50 * millisecond)
    }

    @Test func maximumBelowInitialIsRaisedAndTinyValuesHaveAFloor() {
        let odd = APNsBackoff(initial: .seconds(2), maximum: .seconds(1))
        #expect(odd.ceilingNanoseconds(attempt: 5) == 2 * second)
        let tiny = APNsBackoff(initial: .zero, maximum: .zero)
        #expect(tiny.ceilingNanoseconds(attempt: 1) == millisecond)
    }
}
