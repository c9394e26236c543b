/// Holds back the outputs of one partition's records until they may join a transaction:
/// a record's outputs are released once it and every record before it in the partition are
/// complete, in offset order, together with the offset to commit after them.
///
/// This is what makes a transaction's records exactly the outputs of the input records whose
/// offsets it commits: outputs of a record that completes early wait for the records before it,
/// so no transaction carries an output whose input offset it does not commit, and a record's
/// outputs are only released once it is complete (every output it will cause was appended).
///
/// Offsets are tracked in consumption order (strictly increasing, gaps allowed) and completed in
/// any order. Not thread-safe: one owner (``PartitionProgress`` guards it with a lock).
public struct PartitionOutputSequencer<Output>: Sendable where Output: Sendable {
    struct Entry: Sendable {
        var offset: Int64
        var isComplete: Bool
        var outputs: [Output]
        /// The weight of `outputs` together (see ``append(_:weight:to:)``).
        var weight: Int
    }

    /// What a partition hands to the next transaction: outputs in offset order, and the offset
    /// to commit with them (one past the last released record).
    public struct Release: Sendable {
        public var outputs: [Output]
        public var nextOffset: Int64
    }

    /// Pending records in offset order; `entries[head...]` are live.
    private var entries: [Entry] = []
    private var head = 0
    private var lastTracked: Int64?
    /// Index in `entries` of the first live record not complete (`entries.count` when there is none).
    private var firstIncomplete = 0
    /// Outputs appended and not yet released or discarded.
    public private(set) var bufferedOutputCount = 0
    /// The weight of the outputs waiting behind a record that is not complete: they cannot be
    /// released until it completes, however soon the next transaction comes. One record that
    /// never completes makes this grow with every record after it that does.
    public private(set) var blockedWeight = 0

    /// Creates an empty sequencer.
    public init() {}

    /// Records tracked and not yet released.
    public var pendingCount: Int { entries.count - head }

    /// Whether every record tracked is complete (its outputs may still wait for a transaction).
    public var isEveryRecordComplete: Bool { firstIncomplete == entries.count }

    /// Registers a consumed record. Returns false (and ignores it) unless `offset` is above every
    /// offset tracked before: a record delivered again cannot take over another's entry.
    @discardableResult
    public mutating func track(_ offset: Int64) -> Bool {
        if let lastTracked, offset <= lastTracked { return false }
        entries.append(Entry(offset: offset, isComplete: false, outputs: [], weight: 0))
        lastTracked = offset
        return true
    }

    /// Buffers one output of a pending, not yet complete record; `weight` is what it counts for
    /// in ``blockedWeight``. Returns false (the output is not kept) for any other offset.
    @discardableResult
    public mutating func append(_ output: Output, weight: Int = 1, to offset: Int64) -> Bool {
        guard let index = find(offset), !entries[index].isComplete else { return false }
        entries[index].outputs.append(output)
        entries[index].weight += weight
        bufferedOutputCount += 1
        blockedWeight += weight  // its record is not complete, so it is at or after `firstIncomplete`
        return true
    }

    /// Marks a pending record complete: it will cause no further output. Returns false for an
    /// offset that is not pending or already complete.
    @discardableResult
    public mutating func complete(_ offset: Int64) -> Bool {
        guard let index = find(offset), !entries[index].isComplete else { return false }
        entries[index].isComplete = true
        while firstIncomplete < entries.count, entries[firstIncomplete].isComplete {
            blockedWeight -= entries[firstIncomplete].weight
            firstIncomplete += 1
        }
        return true
    }

    /// Takes the outputs of the complete prefix (every record up to the first incomplete one),
    /// in offset order, with the offset to commit after them; nil when that prefix is empty.
    public mutating func takeReleased() -> Release? {
        var outputs: [Output] = []
        var nextOffset: Int64?
        while head < entries.count, entries[head].isComplete {
            outputs.append(contentsOf: entries[head].outputs)
            nextOffset = entries[head].offset + 1
            entries[head].outputs = []
            entries[head].weight = 0
            head += 1
        }
        compactIfWorthIt()
        guard let nextOffset else { return nil }
        bufferedOutputCount -= outputs.count
        return Release(outputs: outputs, nextOffset: nextOffset)
    }

    /// Forgets every pending record and buffered output (partition revoked, or the transaction
    /// that was to carry them aborted for good). Returns the sum of `weight` over the dropped
    /// outputs (by default, how many were dropped).
    @discardableResult
    public mutating func discardAll(weighing weight: (Output) -> Int = { _ in 1 }) -> Int {
        var dropped = 0
        for entry in entries[head...] {
            for output in entry.outputs { dropped += weight(output) }
        }
        entries.removeAll()
        head = 0
        firstIncomplete = 0
        lastTracked = nil
        bufferedOutputCount = 0
        blockedWeight = 0
        return dropped
    }

    /// Index in `entries` of the pending record `offset` (binary search: offsets increase).
    private func find(_ offset: Int64) -> Int? {
        var low = head
        var high = entries.count - 1
        while low <= high {
            let middle = (low + high) / 2
            let value = entries[middle].offset
            if value == offset { return middle }
            if value < offset { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    /// Drops released entries from the front once they are at least half of the storage, and
    /// gives back storage grown by a burst once the live entries fill less than an eighth of it.
    private mutating func compactIfWorthIt() {
        guard head > 0, head >= 64 || head == entries.count, head * 2 >= entries.count else { return }
        let live = entries.count - head
        if entries.capacity > Self.retainedCapacity, live < entries.capacity / 8 {
            var kept: [Entry] = []  // a new buffer: the live entries, and the storage always kept
            kept.reserveCapacity(max(live, Self.retainedCapacity))
            kept.append(contentsOf: entries[head...])
            entries = kept
        } else {
            entries.removeFirst(head)
        }
        firstIncomplete -= head
        head = 0
    }

    /// Entries' storage kept however few records are pending (as the offset tracker keeps).
    static var retainedCapacity: Int { 4096 }

    /// Entries the storage has room for.
    var capacity: Int { entries.capacity }
}
