/// The pool's notifications on streams, by stream tag.
///
/// A slot array reused through a free list: a tag is its slot's index and that slot's
/// generation, so finding an answer's notification is an index and a compare, not a hash, and a
/// freed slot (whose memory is warm) takes the next stream. The generation changes each time a
/// slot is freed, so a stale tag (a stream reported twice) finds nothing. Loop thread only, like
/// its pool.
struct APNsInFlightTable {
    private struct Slot {
        /// Never 0, so no tag is 0.
        var generation: UInt32 = 1
        var flight: APNsConnectionPool.InFlight?
    }

    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    /// Notifications on streams.
    private(set) var count = 0
    /// Slots ever used: the most notifications on streams at once (for tests).
    var slotCount: Int { slots.count }

    /// The tag the next `insert` returns (so a stream can carry it before its notification is
    /// stored).
    var nextTag: UInt64 {
        guard let free = freeSlots.last else { return Self.tag(index: slots.count, generation: Slot().generation) }
        return Self.tag(index: free, generation: slots[free].generation)
    }

    /// Stores `flight` under `nextTag` and returns that tag.
    @discardableResult
    mutating func insert(_ flight: consuming APNsConnectionPool.InFlight) -> UInt64 {
        let index: Int
        if let free = freeSlots.popLast() {
            index = free
        } else {
            index = slots.count
            slots.append(Slot())
        }
        slots[index].flight = flight
        count += 1
        return Self.tag(index: index, generation: slots[index].generation)
    }

    private static func tag(index: Int, generation: UInt32) -> UInt64 {
        UInt64(generation) << 32 | UInt64(index)
    }

    /// Takes the notification of `tag` out; nil for a tag not (or no longer) in the table.
    mutating func remove(tag: UInt64) -> APNsConnectionPool.InFlight? {
        let index = Int(tag & 0xffff_ffff)
        guard index < slots.count, slots[index].generation == UInt32(truncatingIfNeeded: tag >> 32),
              slots[index].flight != nil else { return nil }
        slots[index].generation = slots[index].generation == .max ? 1 : slots[index].generation + 1
        freeSlots.append(index)
        count -= 1
        // Moved straight out of the slot into the result: binding it first cost three more moves of the value.
        return slots[index].flight.take()
    }
}
