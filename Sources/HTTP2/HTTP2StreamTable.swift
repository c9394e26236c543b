/// The open streams of one client connection by stream id: an open-addressing table indexed by
/// `id >> 1`, with Robin Hood linear probing.
///
/// A client's stream ids are odd and increase by two, so the streams open at once sit in
/// consecutive slots: the streams a pump submits, whose frames then leave, and whose answers
/// arrive (mostly in the order they were sent) touch memory in order, which the processor
/// prefetches. Spread by a hash, each of those touches was a cache miss on its own: one slot is
/// two cache lines, and the table a few hundred KiB. A `Dictionary` hashed each of the six lookups
/// a stream makes (submit, two headers, end of stream, request body, close) with SipHash.
///
/// Robin Hood order (no entry is farther from its home slot than the one before it, plus one) is
/// what keeps removal short: it shifts the following entries back only until one sits at its home
/// or a slot is empty, not to the end of the run. Without it, consecutive ids formed one run as
/// long as the open streams and every removal walked it. Ids collide (a multiple of twice the
/// capacity apart) when a stream stays open while that many newer ones are opened; a lookup stops
/// at the first entry nearer its home than the key would be. The capacity doubles when the table
/// is half full and never shrinks. Not thread-safe: the connection's loop thread only.
struct HTTP2StreamTable<Value> {
    /// 0 marks an empty slot (stream ids are at least 1).
    private var keys: [Int32]
    private var values: [Value?]
    private var mask: Int
    /// Streams in the table.
    private(set) var count = 0

    /// An empty table with room for `minimumCapacity` streams before it grows.
    init(minimumCapacity: Int = 64) {
        var capacity = 16
        while capacity < minimumCapacity * 2 { capacity *= 2 }
        keys = Array(repeating: 0, count: capacity)
        values = Array(repeating: nil, count: capacity)
        mask = capacity - 1
    }

    /// Whether no stream is open.
    var isEmpty: Bool { count == 0 }

    /// Slots allocated (at least twice `count`).
    var capacity: Int { keys.count }

    /// The slot a key's probe starts at.
    @inline(__always)
    func home(of key: Int32) -> Int { Int(key >> 1) & mask }

    /// How far the entry in `slot` (which holds one) sits past its home slot.
    @inline(__always)
    private func displacement(ofSlot slot: Int) -> Int { (slot &- home(of: keys[slot])) & mask }

    /// The slot holding `key`, or nil. Valid until the next insert or removal.
    func slot(of key: Int32) -> Int? {
        guard key > 0 else { return nil }
        var slot = home(of: key)
        var distance = 0
        while true {
            let stored = keys[slot]
            if stored == key { return slot }
            // In Robin Hood order, `key` would sit before an entry nearer its home than `distance`.
            if stored == 0 || displacement(ofSlot: slot) < distance { return nil }
            slot = (slot + 1) & mask
            distance += 1
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
        guard keys[slot] != 0 else {
            // The usual case: the home slot is free.
            keys[slot] = key
            values[slot] = value
            count += 1
            return
        }
        // Robin Hood: the entry being placed takes the slot of the first one nearer its home, which
        // then goes on looking for a slot in its place.
        var carriedKey = key
        var carriedValue: Value? = value
        var distance = 0
        while keys[slot] != 0 {
            // invariant: as above, so an open stream's id never comes back.
            precondition(keys[slot] != carriedKey, "stream \(carriedKey) is already open")
            let resident = displacement(ofSlot: slot)
            if resident < distance {
                swap(&keys[slot], &carriedKey)
                swap(&values[slot], &carriedValue)
                distance = resident
            }
            slot = (slot + 1) & mask
            distance += 1
        }
        keys[slot] = carriedKey
        values[slot] = carriedValue.take()
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

    /// Whether every entry sits at most one slot farther from its home than the entry before it
    /// (for tests: the order that lets lookups and removals stop early).
    var isInRobinHoodOrder: Bool {
        for slot in keys.indices where keys[slot] != 0 {
            let previous = (slot &- 1) & mask
            let allowed = keys[previous] == 0 ? 0 : displacement(ofSlot: previous) + 1
            if displacement(ofSlot: slot) > allowed { return false }
        }
        return true
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

    /// Backward-shift deletion: moves each following entry that sits past its home one slot back
    /// into the emptied `gap`, up to an empty slot or an entry at its home. In Robin Hood order,
    /// no entry beyond those is displaced across the gap, and the order still holds afterwards.
    private mutating func closeGap(at start: Int) {
        var gap = start
        var slot = (gap + 1) & mask
        while keys[slot] != 0, displacement(ofSlot: slot) > 0 {
            keys[gap] = keys[slot]
            values[gap] = values[slot].take()
            keys[slot] = 0
            gap = slot
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
        count = 0
        for slot in oldKeys.indices where oldKeys[slot] != 0 {
            // invariant: a slot with a key holds a value.
            insert(oldValues[slot].take()!, forKey: oldKeys[slot])
        }
    }
}
