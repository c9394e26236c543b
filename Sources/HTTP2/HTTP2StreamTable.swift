/// The open streams of one client connection by stream id: an open-addressing table with linear
/// probing and Fibonacci hashing (a multiply and a shift).
///
/// A `Dictionary` hashed each of the six lookups a stream makes (submit, two headers, end of
/// stream, request body, close) with SipHash. The multiply matters: a client's ids are odd and
/// consecutive, and indexed by `id >> 1` they formed one run as long as the open streams, which
/// every removal had to walk to its end. Removal shifts the following entries of the run back (no
/// tombstones), so a long connection never slows down. The capacity doubles when the table is
/// half full and never shrinks. Not thread-safe: the connection's loop thread only.
struct HTTP2StreamTable<Value> {
    /// 0 marks an empty slot (stream ids are at least 1).
    private var keys: [Int32]
    private var values: [Value?]
    private var mask: Int
    /// 32 − log2(capacity): the hash keeps the top bits of the product.
    private var shift: UInt32
    /// Streams in the table.
    private(set) var count = 0

    /// An empty table with room for `minimumCapacity` streams before it grows.
    init(minimumCapacity: Int = 64) {
        var capacity = 16
        while capacity < minimumCapacity * 2 { capacity *= 2 }
        keys = Array(repeating: 0, count: capacity)
        values = Array(repeating: nil, count: capacity)
        mask = capacity - 1
        shift = UInt32(32 - capacity.trailingZeroBitCount)
    }

    /// Whether no stream is open.
    var isEmpty: Bool { count == 0 }

    /// Slots allocated (at least twice `count`).
    var capacity: Int { keys.count }

    /// The slot a key's probe starts at.
    @inline(__always)
    func home(of key: Int32) -> Int { Int((UInt32(bitPattern: key) &* 0x9E37_79B9) >> shift) }

    /// The slot holding `key`, or nil. Valid until the next insert or removal.
    func slot(of key: Int32) -> Int? {
        guard key > 0 else { return nil }
        var slot = home(of: key)
        while true {
            let stored = keys[slot]
            if stored == key { return slot }
            if stored == 0 { return nil }
            slot = (slot + 1) & mask
        }
    }

    /// The value in `slot` (from `slot(of:)`), read or changed in place.
    subscript(slot slot: Int) -> Value {
        get {
            // invariant: callers pass a slot `slot(of:)` just returned, which holds a value.
            values[slot]!
        }
        _modify {
            // invariant: as above.
            yield &values[slot]!
        }
    }

    /// Adds `value` for `key` (a positive stream id not in the table).
    mutating func insert(_ value: consuming Value, forKey key: Int32) {
        // invariant: nghttp2 hands out each positive stream id once per session.
        precondition(key > 0, "stream ids are positive")
        if (count + 1) * 2 > keys.count { grow() }
        var slot = home(of: key)
        while keys[slot] != 0 {
            // invariant: as above, so an open stream's id never comes back.
            precondition(keys[slot] != key, "stream \(key) is already open")
            slot = (slot + 1) & mask
        }
        keys[slot] = key
        values[slot] = value
        count += 1
    }

    /// Removes and returns the value of `key`, or nil when it is not in the table.
    mutating func removeValue(forKey key: Int32) -> Value? {
        guard let slot = slot(of: key) else { return nil }
        let value = values[slot].take()
        keys[slot] = 0
        count -= 1
        closeGap(at: slot)
        return value
    }

    /// Calls `body` with every (stream id, value), in no particular order.
    func forEach(_ body: (Int32, Value) throws -> Void) rethrows {
        for slot in keys.indices where keys[slot] != 0 {
            // invariant: a slot with a key holds a value.
            try body(keys[slot], values[slot]!)
        }
    }

    /// Empties the table and returns what it held, in no particular order.
    mutating func removeAll() -> [(Int32, Value)] {
        var all: [(Int32, Value)] = []
        all.reserveCapacity(count)
        for slot in keys.indices where keys[slot] != 0 {
            // invariant: a slot with a key holds a value.
            all.append((keys[slot], values[slot].take()!))
            keys[slot] = 0
        }
        count = 0
        return all
    }

    /// Backward-shift deletion: moves later entries of the probe run into the emptied `gap`
    /// when their home slot allows it, so every lookup still finds its key before an empty slot.
    private mutating func closeGap(at start: Int) {
        var gap = start
        var slot = (gap + 1) & mask
        while keys[slot] != 0 {
            let home = home(of: keys[slot])
            // The entry may move to `gap` when its home is not in (gap, slot] (cyclically).
            let distanceToSlot = (slot - home) & mask
            let distanceToGap = (gap - home) & mask
            if distanceToGap < distanceToSlot {
                keys[gap] = keys[slot]
                values[gap] = values[slot].take()
                keys[slot] = 0
                gap = slot
            }
            slot = (slot + 1) & mask
        }
    }

    private mutating func grow() {
        let oldKeys = keys
        var oldValues = values
        let capacity = keys.count * 2
        keys = Array(repeating: 0, count: capacity)
        values = Array(repeating: nil, count: capacity)
        mask = capacity - 1
        shift = UInt32(32 - capacity.trailingZeroBitCount)
        count = 0
        for slot in oldKeys.indices where oldKeys[slot] != 0 {
            // invariant: a slot with a key holds a value.
            insert(oldValues[slot].take()!, forKey: oldKeys[slot])
        }
    }
}
