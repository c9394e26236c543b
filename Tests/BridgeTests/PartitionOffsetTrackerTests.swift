import Bridge
import BridgeLocal
import Testing

@Suite struct PartitionOffsetTrackerTests {
    /// A partition that once held many records behind a stuck one gives the memory back once
    /// they are committed, and the pending ones survive every resize in order.
    @Test func theRingShrinksBackOnceItsRecordsAreCommitted() {
        var tracker = PartitionOffsetTracker()
        for offset in 0..<Int64(100_000) { tracker.track(offset) }
        #expect(tracker.capacity >= 100_000)
        // The stuck first record holds the others, completed behind it.
        for offset in 1..<Int64(100_000) { tracker.complete(offset) }
        #expect(tracker.pendingCount == 100_000)
        tracker.complete(0)
        #expect(tracker.committableNextOffset() == 100_000)
        #expect(tracker.isEmpty)
        // Shrinking happens as records complete; a fresh burst that stays small keeps it small.
        for offset in Int64(100_000)..<Int64(100_100) { tracker.track(offset) }
        for offset in Int64(100_000)..<Int64(100_100) { tracker.complete(offset) }
        #expect(tracker.capacity <= 4096, "\(tracker.capacity) slots kept for nothing")
        // Pending entries keep their order through the halvings.
        for offset in Int64(200_000)..<Int64(300_000) { tracker.track(offset) }
        for offset in Int64(200_001)..<Int64(299_990) { tracker.complete(offset) }
        tracker.complete(200_000)
        #expect(tracker.committableNextOffset() == 299_990)
        #expect(tracker.pendingCount == 10)
    }

    @Test func contiguousCompletionAdvancesTheCommitOffset() {
        var tracker = PartitionOffsetTracker()
        do { let value = tracker.committableNextOffset(); #expect(value == nil) }
        for offset in Int64(10)...14 { let value = tracker.track(offset); #expect(value) }
        do { let value = tracker.complete(12); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == nil) }  // 10 and 11 still pending
        do { let value = tracker.complete(10); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == 11) }
        do { let value = tracker.committableNextOffset(); #expect(value == nil) }  // nothing new
        do { let value = tracker.complete(11); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == 13) }   // 11 and 12 done
        do { let value = tracker.complete(14); #expect(value) }
        #expect(tracker.pendingCount == 2)  // 13 pending, 14 done behind it
        do { let value = tracker.complete(13); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == 15) }
        #expect(tracker.isEmpty)
    }

    @Test func gapsInOffsetsAreFine() {
        var tracker = PartitionOffsetTracker()
        for offset: Int64 in [5, 7, 8, 20, 1000] { tracker.track(offset) }
        do { let value = tracker.complete(7); #expect(value) }
        do { let value = tracker.complete(1000); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == nil) }
        do { let value = tracker.complete(5); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == 8) }
        do { let value = tracker.complete(20); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == nil) }
        do { let value = tracker.complete(8); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == 1001) }
    }

    @Test func rejectsBadInputWithoutCrashing() {
        var tracker = PartitionOffsetTracker()
        do { let value = tracker.complete(3); #expect(value == false) }
        do { let value = tracker.track(3); #expect(value) }
        do { let value = tracker.track(3); #expect(value == false) }   // not increasing
        do { let value = tracker.track(2); #expect(value == false) }
        do { let value = tracker.complete(4); #expect(value == false) }
        do { let value = tracker.complete(3); #expect(value) }
        do { let value = tracker.complete(3); #expect(value == false) }  // twice
        do { let value = tracker.committableNextOffset(); #expect(value == 4) }
        do { let value = tracker.track(2); #expect(value == false) }     // below what was already tracked
    }

    @Test func resetForgetsEverything() {
        var tracker = PartitionOffsetTracker()
        for offset in Int64(0)..<100 { tracker.track(offset) }
        tracker.complete(0)
        tracker.reset()
        do { let value = tracker.committableNextOffset(); #expect(value == nil) }
        #expect(tracker.isEmpty)
        do { let value = tracker.complete(1); #expect(value == false) }
        do { let value = tracker.track(50); #expect(value) }  // after a reassignment, consumption may restart lower
        do { let value = tracker.complete(50); #expect(value) }
        do { let value = tracker.committableNextOffset(); #expect(value == 51) }
    }

    @Test func growsBeyondItsInitialCapacity() {
        var tracker = PartitionOffsetTracker(initialCapacity: 4)
        for offset in Int64(0)..<10_000 { tracker.track(offset * 2) }
        for offset in stride(from: Int64(9_999), through: 1, by: -1) { tracker.complete(offset * 2) }
        do { let value = tracker.committableNextOffset(); #expect(value == nil) }
        #expect(tracker.pendingCount == 10_000)
        tracker.complete(0)
        do { let value = tracker.committableNextOffset(); #expect(value == 19_999) }
        #expect(tracker.isEmpty)
    }

    /// Random interleavings of track / complete / commit checks against a simple model.
    @Test func matchesAReferenceModel() {
        var rng = SeededGenerator(seed: 0x0FF5E7)
        for _ in 0..<200 {
            var tracker = PartitionOffsetTracker(initialCapacity: 2)
            var tracked: [Int64] = []          // model: every tracked offset in order
            var completed = Set<Int64>()
            var lastCommitted: Int64?
            var nextOffset = Int64.random(in: 0...1000, using: &rng)
            for _ in 0..<300 {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<4:
                    nextOffset += Int64.random(in: 1...3, using: &rng)
                    do { let value = tracker.track(nextOffset); #expect(value) }
                    tracked.append(nextOffset)
                case 4..<8:
                    let candidates = tracked.filter { !completed.contains($0) }
                    guard let pick = candidates.randomElement(using: &rng) else { continue }
                    let wasCommittedPast = lastCommitted.map { pick < $0 } ?? false
                    do { let value = tracker.complete(pick); #expect(value == !wasCommittedPast) }
                    completed.insert(pick)
                case 8:
                    do { let value = tracker.complete(nextOffset + 100); #expect(value == false) }
                default:
                    // Model: the first tracked offset not completed bounds the commit.
                    var expected: Int64?
                    for offset in tracked {
                        if completed.contains(offset) { expected = offset + 1 } else { break }
                    }
                    let reported = tracker.committableNextOffset()
                    if expected != lastCommitted {
                        #expect(reported == expected)
                        lastCommitted = expected
                    } else {
                        #expect(reported == nil)
                    }
                }
            }
        }
    }
}
