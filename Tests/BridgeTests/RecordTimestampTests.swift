@testable import Bridge
import Testing

/// Contract §3: `latency_ms` is null for an unusable timestamp, and no timestamp can trap.
@Suite struct RecordTimestampTests {
    static let now: Int64 = 1_790_000_000_000

    @Test func timestampsWithinADayAreUsable() {
        #expect(RecordTimestamp.usable(Self.now - 5_000, nowMilliseconds: Self.now) == Self.now - 5_000)
        #expect(RecordTimestamp.usable(Self.now + 86_400_000, nowMilliseconds: Self.now) == Self.now + 86_400_000)
        #expect(RecordTimestamp.usable(Self.now - 86_400_000, nowMilliseconds: Self.now) == Self.now - 86_400_000)
    }

    @Test func absentOrAbsurdTimestampsAreNot() {
        let absurd: [Int64?] = [nil, 0, -1, Int64.min, Int64.max, Int64.max / 1000 + 1, Self.now + 86_400_001,
                                Self.now - 86_400_001, 253_402_300_800_000]
        for timestamp in absurd {
            #expect(RecordTimestamp.usable(timestamp, nowMilliseconds: Self.now) == nil, "\(String(describing: timestamp))")
        }
    }

    @Test func latencyNeverTraps() {
        let nowMicroseconds = Self.now * 1000
        #expect(RecordTimestamp.latencyMilliseconds(from: Self.now - 18, nowMicroseconds: nowMicroseconds + 400) == 18.4)
        #expect(RecordTimestamp.latencyMilliseconds(from: nil, nowMicroseconds: nowMicroseconds) == nil)
        // Values no usable timestamp can have still answer (nil) instead of trapping.
        for start in [Int64.max, Int64.min, Int64.max / 1000 + 1] {
            #expect(RecordTimestamp.latencyMilliseconds(from: start, nowMicroseconds: nowMicroseconds) == nil)
        }
        #expect(RecordTimestamp.latencyMilliseconds(from: 0, nowMicroseconds: Int64.min) == Double(Int64.min) / 1000)
    }
}
