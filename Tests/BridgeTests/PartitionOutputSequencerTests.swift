@testable import Bridge
import BridgeLocal
import Testing

@Suite struct PartitionOutputSequencerTests {
    /// An output names the input offset that caused it and its index among that record's outputs.
    struct Output: Equatable, Sendable {
        var offset: Int64
        var index: Int
    }

    @Test func outputsWaitForEveryEarlierRecordAndLeaveInOffsetOrder() {
        var sequencer = PartitionOutputSequencer<Output>()
        for offset in Int64(10)...12 { let value = sequencer.track(offset); #expect(value) }
        do { let value = sequencer.append(Output(offset: 12, index: 0), to: 12); #expect(value) }
        do { let value = sequencer.complete(12); #expect(value) }
        do { let value = sequencer.takeReleased(); #expect(value == nil) }  // 10 and 11 not complete
        do { let value = sequencer.append(Output(offset: 10, index: 0), to: 10); #expect(value) }
        do { let value = sequencer.append(Output(offset: 10, index: 1), to: 10); #expect(value) }
        do { let value = sequencer.complete(10); #expect(value) }
        let first = sequencer.takeReleased()
        #expect(first?.outputs == [Output(offset: 10, index: 0), Output(offset: 10, index: 1)])
        #expect(first?.nextOffset == 11)
        do { let value = sequencer.complete(11); #expect(value) }  // a record with no output (yet complete) still advances
        let second = sequencer.takeReleased()
        #expect(second?.outputs == [Output(offset: 12, index: 0)])
        #expect(second?.nextOffset == 13)
        #expect(sequencer.pendingCount == 0)
        #expect(sequencer.bufferedOutputCount == 0)
    }

    /// The weight blocked behind an unfinished record: what a stuck partition holds, however
    /// soon the next transaction comes. Outputs of the complete prefix are not blocked.
    @Test func theBlockedWeightIsWhatWaitsBehindTheFirstRecordNotComplete() {
        var sequencer = PartitionOutputSequencer<Output>()
        for offset in Int64(0)..<200 { let value = sequencer.track(offset); #expect(value) }
        // Offset 0 never completes; every later one gets an output of weight 3, and completes.
        for offset in Int64(1)..<200 {
            do { let value = sequencer.append(Output(offset: offset, index: 0), weight: 3, to: offset); #expect(value) }
            do { let value = sequencer.complete(offset); #expect(value) }
        }
        #expect(sequencer.blockedWeight == 199 * 3)
        #expect(sequencer.takeReleased() == nil)
        // Offset 0 gets an output (blocked too, its record not complete), then completes: nothing is blocked.
        do { let value = sequencer.append(Output(offset: 0, index: 0), weight: 5, to: 0); #expect(value) }
        #expect(sequencer.blockedWeight == 199 * 3 + 5)
        do { let value = sequencer.complete(0); #expect(value) }
        #expect(sequencer.blockedWeight == 0)
        #expect(sequencer.takeReleased()?.outputs.count == 200)

        // After the release (and the storage's compaction) the count follows the new first unfinished record.
        for offset in Int64(200)..<300 { let value = sequencer.track(offset); #expect(value) }
        do { let value = sequencer.append(Output(offset: 200, index: 0), weight: 2, to: 200); #expect(value) }
        do { let value = sequencer.complete(200); #expect(value) }
        do { let value = sequencer.append(Output(offset: 250, index: 0), weight: 7, to: 250); #expect(value) }
        do { let value = sequencer.complete(250); #expect(value) }
        #expect(sequencer.blockedWeight == 7)  // 200 is releasable; 250 waits behind 201
        #expect(sequencer.takeReleased()?.nextOffset == 201)
        for offset in Int64(201)..<250 { let value = sequencer.complete(offset); #expect(value) }
        #expect(sequencer.blockedWeight == 0)
        do { let value = sequencer.append(Output(offset: 299, index: 0), weight: 4, to: 299); #expect(value) }
        #expect(sequencer.blockedWeight == 4)
        #expect(sequencer.discardAll() == 2)
        #expect(sequencer.blockedWeight == 0)
    }

    @Test func aCompleteRecordTakesNoMoreOutputsAndUnknownOffsetsAreRefused() {
        var sequencer = PartitionOutputSequencer<Output>()
        do { let value = sequencer.append(Output(offset: 1, index: 0), to: 1); #expect(!value) }
        do { let value = sequencer.complete(1); #expect(!value) }
        do { let value = sequencer.track(1); #expect(value) }
        do { let value = sequencer.complete(1); #expect(value) }
        do { let value = sequencer.complete(1); #expect(!value) }
        do { let value = sequencer.append(Output(offset: 1, index: 0), to: 1); #expect(!value) }
        do { let value = sequencer.takeReleased(); #expect(value?.outputs == []) }
        // Re-delivered at or below what was tracked: ignored, cannot reopen a released record.
        do { let value = sequencer.track(1); #expect(!value) }
        do { let value = sequencer.track(0); #expect(!value) }
        do { let value = sequencer.append(Output(offset: 1, index: 0), to: 1); #expect(!value) }
    }

    /// The storage a burst grew is given back once the burst is released, as the at-least-once
    /// offset ring does: otherwise every partition would keep its peak for as long as it is assigned.
    @Test func theStorageShrinksBackOnceABurstIsReleased() {
        var sequencer = PartitionOutputSequencer<Output>()
        for offset in Int64(0)..<100_000 { sequencer.track(offset) }
        #expect(sequencer.capacity >= 100_000)
        for offset in Int64(1)..<100_000 { sequencer.complete(offset) }
        #expect(sequencer.takeReleased() == nil)  // held back by offset 0
        sequencer.complete(0)
        #expect(sequencer.takeReleased()?.nextOffset == 100_000)
        for offset in Int64(100_000)..<100_100 {
            sequencer.track(offset)
            sequencer.complete(offset)
        }
        #expect(sequencer.takeReleased()?.nextOffset == 100_100)
        #expect(sequencer.capacity <= PartitionOutputSequencer<Output>.retainedCapacity, "\(sequencer.capacity) entries kept for nothing")
        // Pending entries keep their order through a shrink.
        for offset in Int64(200_000)..<200_010 { sequencer.track(offset) }
        for offset in Int64(200_001)..<200_010 { sequencer.complete(offset) }
        sequencer.complete(200_000)
        #expect(sequencer.takeReleased()?.nextOffset == 200_010)
    }

    @Test func discardDropsBufferedOutputsAndStartsAfresh() {
        var sequencer = PartitionOutputSequencer<Output>()
        sequencer.track(4)
        sequencer.track(5)
        sequencer.append(Output(offset: 5, index: 0), to: 5)
        sequencer.append(Output(offset: 5, index: 1), to: 5)
        sequencer.complete(5)
        // Weighed as the caller says (by default, counted).
        do { var copy = sequencer; let value = copy.discardAll(weighing: { $0.index == 0 ? 40 : 2 }); #expect(value == 42) }
        do { let value = sequencer.discardAll(); #expect(value == 2) }
        do { let value = sequencer.takeReleased(); #expect(value == nil) }
        do { let value = sequencer.track(4); #expect(value) }  // the partition's records come again after a rewind
    }

    /// The transaction invariant, over many random interleavings: every release carries exactly
    /// the outputs of the records between the previous release's offset and its own, all of them,
    /// in offset order; nothing is released twice and nothing incomplete is released.
    @Test(arguments: 0..<40) func releasesAreExactlyTheOutputsOfTheOffsetsTheyCommit(seed: Int) {
        var random = SeededGenerator(seed: UInt64(seed) &+ 0x5EC0)
        var sequencer = PartitionOutputSequencer<Output>()
        let offsets = (0..<200).reduce(into: [Int64]()) { list, _ in
            list.append((list.last ?? 99) + Int64(random.next(below: 3) + 1))  // gaps like compaction leaves
        }
        var expectedOutputs: [Int64: Int] = [:]
        var open: [Int64] = []
        var tracked = 0
        var committed: Int64 = offsets[0]
        var released: [Output] = []
        var completed: Set<Int64> = []
        while committed <= offsets.last! {
            switch random.next(below: 4) {
            case 0 where tracked < offsets.count:
                let offset = offsets[tracked]
                tracked += 1
                do { let value = sequencer.track(offset); #expect(value) }
                expectedOutputs[offset] = random.next(below: 4)
                open.append(offset)
            case 1 where !open.isEmpty:
                // One record makes progress: emits its outputs (maybe in two goes), then completes.
                let offset = open.remove(at: random.next(below: open.count))
                for index in 0..<expectedOutputs[offset]! {
                    do { let value = sequencer.append(Output(offset: offset, index: index), to: offset); #expect(value) }
                }
                do { let value = sequencer.complete(offset); #expect(value) }
                completed.insert(offset)
            default:
                guard let release = sequencer.takeReleased() else { continue }
                let inRange = offsets.filter { $0 >= committed && $0 < release.nextOffset }
                #expect(inRange.allSatisfy(completed.contains))
                let expected = inRange.flatMap { offset in (0..<expectedOutputs[offset]!).map { Output(offset: offset, index: $0) } }
                #expect(release.outputs == expected)
                released += release.outputs
                committed = release.nextOffset
            }
        }
        #expect(committed == offsets.last! + 1)
        #expect(released.count == expectedOutputs.values.reduce(0, +))
        #expect(sequencer.bufferedOutputCount == 0)
    }
}

extension SeededGenerator {
    mutating func next(below bound: Int) -> Int { Int.random(in: 0..<bound, using: &self) }
}
