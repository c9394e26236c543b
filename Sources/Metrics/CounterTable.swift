import Synchronization

/// A fixed table of counters created on first use, for a family whose label combinations are
/// bounded but too many to create up front (e.g. APNs status × reason).
///
/// The caller maps its label values to an index once (a switch or a dictionary built at start);
/// `counter(at:)` is then a lock-free load, and only the first use of a cell takes the registry's
/// lock to create its series. A series appears on `/metrics` from its first use.
public final class CounterTable: @unchecked Sendable {
    private final class Box: Sendable {
        let counter: Counter
        init(_ counter: Counter) { self.counter = counter }
    }

    /// Number of cells.
    public let count: Int
    /// Each cell: 0, or the address of its `Box`, retained once by the table until `deinit`.
    /// (A plain atomic word: `AtomicLazyReference.load()` cost some 700 instructions a call.)
    private let cells: UnsafeMutablePointer<Atomic<UInt>>
    private let make: @Sendable (Int) -> Counter

    /// A table of `count` cells; `make(index)` creates the counter of a cell on first use.
    public init(count: Int, make: @escaping @Sendable (Int) -> Counter) {
        self.count = count
        self.make = make
        cells = .allocate(capacity: count)
        for index in 0..<count {
            (cells + index).initialize(to: Atomic(0))
        }
    }

    deinit {
        for index in 0..<count {
            let bits = cells[index].load(ordering: .acquiring)
            if let address = UnsafeRawPointer(bitPattern: bits) {
                Unmanaged<Box>.fromOpaque(address).release()
            }
        }
        cells.deinitialize(count: count)
        cells.deallocate()
    }

    /// The counter of cell `index` (0 ..< `count`).
    @inline(__always)
    public func counter(at index: Int) -> Counter {
        if let box = publishedBox(at: index) { return box.takeUnretainedValue().counter }
        return create(at: index)
    }

    /// Adds `amount` to the counter of cell `index` (0 ..< `count`): what `counter(at:)` and
    /// `increment` do, without handing the counter out, which retained and released its box and
    /// its storage on every call.
    @inline(__always)
    public func increment(at index: Int, by amount: UInt64 = 1) {
        if let box = publishedBox(at: index) {
            // The table holds the box until its deinit, so borrowing it without a retain is safe.
            box._withUnsafeGuaranteedRef { $0.counter.increment(by: amount) }
            return
        }
        create(at: index).increment(by: amount)
    }

    /// The box cell `index` holds, if one was published.
    @inline(__always)
    private func publishedBox(at index: Int) -> Unmanaged<Box>? {
        precondition(index >= 0 && index < count, "counter table index out of range")  // invariant: callers map to 0..<count
        guard let address = UnsafeRawPointer(bitPattern: cells[index].load(ordering: .acquiring)) else { return nil }
        return Unmanaged<Box>.fromOpaque(address)
    }

    /// First use of a cell: publishes a new box, or takes the one another thread published first.
    private func create(at index: Int) -> Counter {
        let box = Unmanaged.passRetained(Box(make(index)))
        let bits = UInt(bitPattern: box.toOpaque())
        let (stored, existing) = cells[index].compareExchange(
            expected: 0, desired: bits, ordering: .acquiringAndReleasing)
        if stored { return box.takeUnretainedValue().counter }
        box.release()
        // invariant: the exchange failed, so the cell holds another thread's non-zero box address.
        return Unmanaged<Box>.fromOpaque(UnsafeRawPointer(bitPattern: existing)!).takeUnretainedValue().counter
    }
}
