import Testing
@testable import HTTP2

/// The stream table against a `Dictionary` doing the same operations: lookups, in-place changes,
/// removals that close gaps in probe runs, growth, and ids that wrap around the table.
@Suite struct HTTP2StreamTableTests {
    /// A small deterministic generator, so a failure repeats.
    struct SplitMix {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }

    private func expectSame(_ table: HTTP2StreamTable<Int>, _ model: [Int32: Int], probing ids: some Sequence<Int32>) {
        #expect(table.count == model.count)
        #expect(table.isEmpty == model.isEmpty)
        #expect(table.isInRobinHoodOrder)
        for id in ids {
            #expect(table.slot(of: id).map { table[slot: $0] } == model[id], "stream \(id)")
        }
        var seen: [Int32: Int] = [:]
        table.forEach { id, value in seen[id] = value }
        #expect(seen == model)
    }

    @Test func randomOperationsMatchADictionary() {
        var random = SplitMix(state: 42)
        var table = HTTP2StreamTable<Int>(minimumCapacity: 4)
        var model: [Int32: Int] = [:]
        var open: [Int32] = []  // the model's keys, for picking one at random
        var nextID: Int32 = 1
        for step in 0..<4_000 {
            switch random.next(10) {
            case 0..<5:  // open the next stream, as a client does
                table.insert(step, forKey: nextID)
                model[nextID] = step
                open.append(nextID)
                nextID += 2
            case 5..<8:  // close an open stream, often not the oldest
                guard !open.isEmpty else { continue }
                let victim = open.remove(at: random.next(open.count))
                #expect(table.removeValue(forKey: victim) == model.removeValue(forKey: victim))
                #expect(table.isInRobinHoodOrder)
            case 8:  // change a stream in place
                guard let id = open.last, let slot = table.slot(of: id) else { continue }
                table[slot: slot] += 1
                model[id]! += 1
            default:  // ids never opened, and id 0
                #expect(table.slot(of: nextID) == nil)
                #expect(table.slot(of: 0) == nil)
                #expect(table.removeValue(forKey: nextID + 2) == nil)
            }
        }
        expectSame(table, model, probing: stride(from: Int32(1), to: nextID + 4, by: 2))
        let all = table.removeAll()
        #expect(Dictionary(uniqueKeysWithValues: all) == model)
        #expect(table.isEmpty && table.slot(of: all.first?.0 ?? 1) == nil)
    }

    /// Ids whose home slots collide (a multiple of the capacity apart) form one probe run;
    /// removing from its middle must keep the rest reachable.
    @Test func removingFromACollidingRunKeepsTheRestReachable() {
        var table = HTTP2StreamTable<Int>(minimumCapacity: 8)  // 16 slots
        var model: [Int32: Int] = [:]
        // Four ids with one home, then two with the next home: one run of six.
        let candidates = Array(stride(from: Int32(1), to: 10_001, by: 2))
        let first = table.home(of: 1)
        let sameHome = candidates.filter { table.home(of: $0) == first }.prefix(4)
        let nextHome = candidates.filter { table.home(of: $0) == (first + 1) & 15 }.prefix(2)
        let ids = Array(sameHome + nextHome)
        #expect(ids.count == 6)
        for (value, id) in ids.enumerated() {
            table.insert(value, forKey: id)
            model[id] = value
        }
        for id in [ids[1], ids[0], ids[3]] {
            #expect(table.removeValue(forKey: id) == model.removeValue(forKey: id))
            expectSame(table, model, probing: ids)
        }
        let late = candidates.last { table.home(of: $0) == first }!
        table.insert(100, forKey: late)
        model[late] = 100
        expectSame(table, model, probing: ids + [late])
    }

    /// Streams that stay open while thousands of newer ones come and go collide with the newer
    /// ids (which wrap around the table onto their slots); every stream stays reachable, removals
    /// keep the order lookups rely on, and the long-lived streams close last.
    @Test func longLivedStreamsAmongManyShortOnesStayReachable() {
        var random = SplitMix(state: 7)
        var table = HTTP2StreamTable<Int>(minimumCapacity: 32)
        var model: [Int32: Int] = [:]
        var shortLived: [Int32] = []
        var nextID: Int32 = 1
        for step in 0..<20_000 {
            table.insert(step, forKey: nextID)
            model[nextID] = step
            if step % 997 != 0 { shortLived.append(nextID) }  // about one in a thousand stays open
            nextID += 2
            if shortLived.count > 20 {
                let victim = shortLived.remove(at: random.next(shortLived.count))
                #expect(table.removeValue(forKey: victim) == model.removeValue(forKey: victim))
            }
        }
        #expect(table.capacity == 128)
        expectSame(table, model, probing: stride(from: Int32(1), to: nextID + 4, by: 2))
        for id in model.keys.sorted() where !shortLived.contains(id) {
            #expect(table.removeValue(forKey: id) == model.removeValue(forKey: id))
        }
        expectSame(table, model, probing: stride(from: Int32(1), to: nextID + 4, by: 2))
    }

    /// A connection keeps its table for its whole life: after many streams have come and gone, the
    /// table has only grown to what was open at once, and still finds every open stream.
    @Test func aLongConnectionStaysAtItsPeakSize() {
        var table = HTTP2StreamTable<Int>(minimumCapacity: 4)
        var nextID: Int32 = 1
        var oldestOpen: Int32 = 1
        for step in 0..<20_000 {
            table.insert(step, forKey: nextID)
            nextID += 2
            if table.count > 100 {
                #expect(table.removeValue(forKey: oldestOpen) != nil)
                oldestOpen += 2
            }
        }
        #expect(table.count == 100)
        #expect(table.capacity == 256)
        for id in stride(from: oldestOpen, to: nextID, by: 2) { #expect(table.slot(of: id) != nil) }
    }
}
