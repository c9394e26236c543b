/// Tracks the records of one partition from consumption to completion, and tells which offset
/// may be committed: one past the last record of the contiguous completed prefix.
///
/// Offsets are tracked in consumption order (strictly increasing, gaps allowed: compacted topics
/// and transaction markers leave holes) and completed in any order. Entries live in a ring
/// buffer; the completed prefix is dropped as it forms, so work is O(1) amortised per offset
/// (locating an offset is a direct index when offsets are consecutive, a binary search of the
/// pending window otherwise). Not thread-safe: one owner.
public struct PartitionOffsetTracker: Sendable {
    struct Entry: Sendable {
        var offset: Int64
        var done: Bool
    }

    var ring: [Entry]
    var head = 0
    var count = 0
    /// Highest offset ever tracked (new offsets must be above it).
    var lastTracked: Int64?
    /// Offset to commit (last contiguous completed + 1) not yet handed out.
    var pendingCommit: Int64?

    /// Creates an empty tracker with room for `initialCapacity` pending offsets (grows as needed).
    public init(initialCapacity: Int = 64) {
        var capacity = 16
        while capacity < initialCapacity { capacity *= 2 }
        ring = Array(repeating: Entry(offset: 0, done: false), count: capacity)
    }

    /// Records tracked but not yet committed-past (completed ones behind a gap included).
    public var pendingCount: Int { count }

    /// Pending offsets the ring holds before it grows (memory: 16 bytes each).
    public var capacity: Int { ring.count }

    /// Whether nothing is pending.
    public var isEmpty: Bool { count == 0 }

    /// Registers a consumed record. Returns false (and ignores it) unless `offset` is above every
    /// offset tracked before.
    @discardableResult
    public mutating func track(_ offset: Int64) -> Bool {
        if let lastTracked, offset <= lastTracked { return false }
        if count == ring.count { grow() }
        ring[(head + count) & (ring.count - 1)] = Entry(offset: offset, done: false)
        count += 1
        lastTracked = offset
        return true
    }

    /// Marks a tracked record finished (every output acknowledged). Returns false for an offset
    /// that is not pending (never tracked, already completed, or reset).
    @discardableResult
    public mutating func complete(_ offset: Int64) -> Bool {
        guard let position = find(offset), !ring[slot(position)].done else { return false }
        ring[slot(position)].done = true
        while count > 0, ring[head].done {
            // Saturating: an offset is input like any other and must not trap.
            pendingCommit = ring[head].offset == .max ? .max : ring[head].offset + 1
            head = (head + 1) & (ring.count - 1)
            count -= 1
        }
        if ring.count > Self.retainedCapacity, count < ring.count / 8 { resize(to: ring.count / 2) }
        return true
    }

    /// Whether the committable offset advanced since `committableNextOffset()` last returned it.
    public var hasCommittableOffset: Bool { pendingCommit != nil }

    /// The offset to commit (last contiguous completed offset + 1), or nil when it has not
    /// advanced since the previous call.
    public mutating func committableNextOffset() -> Int64? {
        defer { pendingCommit = nil }
        return pendingCommit
    }

    /// Forgets everything (partition revoked or reassigned); tracking starts afresh.
    public mutating func reset() {
        head = 0
        count = 0
        lastTracked = nil
        pendingCommit = nil
    }

    // MARK: Ring buffer

    @inline(__always)
    func slot(_ position: Int) -> Int { (head + position) & (ring.count - 1) }

    /// Position (0 = oldest pending) of `offset`, or nil.
    func find(_ offset: Int64) -> Int? {
        guard count > 0 else { return nil }
        let first = ring[head].offset
        guard offset >= first, let last = lastTracked, offset <= last else { return nil }
        let (guess, overflow) = offset.subtractingReportingOverflow(first)
        if !overflow, guess < Int64(count), ring[slot(Int(guess))].offset == offset { return Int(guess) }
        var low = 0
        var high = count - 1
        while low <= high {
            let middle = (low + high) / 2
            let value = ring[slot(middle)].offset
            if value == offset { return middle }
            if value < offset { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    /// The capacity a ring keeps however empty it gets. Above it, a ring an eighth full is
    /// halved, so a partition that once held many records behind a stuck one gives the memory
    /// back once they are committed (halving leaves it a quarter full: no flapping).
    static let retainedCapacity = 4096

    mutating func grow() {
        resize(to: ring.count * 2)
    }

    /// Moves the pending entries into a ring of `capacity` (a power of two, at least `count`).
    mutating func resize(to capacity: Int) {
        var resized = Array(repeating: Entry(offset: 0, done: false), count: capacity)
        for position in 0..<count { resized[position] = ring[slot(position)] }
        ring = resized
        head = 0
    }
}
