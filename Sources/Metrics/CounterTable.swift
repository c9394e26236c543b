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
    private let cells: UnsafeMutablePointer<AtomicLazyReference<Box>>
    private let make: @Sendable (Int) -> Counter

    /// A table of `count` cells; `make(index)` creates the counter of a cell on first use.
    public init(count: Int, make: @escaping @Sendable (Int) -> Counter) {
        self.count = count
        self.make = make
        cells = .allocate(capacity: count)
        for index in 0..<count {
            (cells + index).initialize(to: AtomicLazyReference())
        }
    }

    deinit {
        cells.deinitialize(count: count)
        cells.deallocate()
    }

    /// The counter of cell `index` (0 ..< `count`).
    @inline(__always)
    public func counter(at index: Int) -> Counter {
        precondition(index >= 0 && index < count, "counter table index out of range")  // invariant: callers map to 0..<count
        if let box = cells[index].load() { return box.counter }
        return cells[index].storeIfNil(Box(make(index))).counter
    }
}
