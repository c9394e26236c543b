import Synchronization

/// A settable clock for tests (Unix seconds).
public final class TestClock: Sendable {
    private let seconds: Atomic<Int64>

    public init(_ start: Int64 = 1_800_000_000) {
        seconds = Atomic(start)
    }

    public var now: Int64 { seconds.load(ordering: .relaxed) }

    public func advance(by delta: Int64) {
        seconds.add(delta, ordering: .relaxed)
    }

    public var function: @Sendable () -> Int64 {
        { self.now }
    }
}
