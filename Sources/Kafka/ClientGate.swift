import Synchronization

/// Who is using a client's handle, and whether the client is closing: a caller enters and
/// leaves with one atomic operation each (a produce call does both for every record), and
/// `close` waits until nobody is inside before it destroys the handle.
final class ClientGate: Sendable {
    /// Callers inside, plus `closingFlag` once closing began.
    private let state = Atomic<Int>(0)
    private static let closingFlag = 1 << 62

    /// Enters unless closing began; a true answer must be followed by `leave()`.
    func enter() -> Bool {
        var current = state.load(ordering: .relaxed)
        while current & Self.closingFlag == 0 {
            let (exchanged, original) = state.compareExchange(
                expected: current, desired: current + 1, ordering: .acquiring)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Leaves after a successful `enter()`.
    func leave() {
        state.subtract(1, ordering: .releasing)
    }

    /// Runs `body` inside the gate; nil, without running it, once closing began.
    @inline(__always)
    func whileInside<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R? {
        guard enter() else { return nil }
        defer { leave() }
        return try body()
    }

    /// Starts closing: nobody enters any more. False when closing had already begun.
    func beginClosing() -> Bool {
        state.bitwiseOr(Self.closingFlag, ordering: .acquiringAndReleasing).oldValue & Self.closingFlag == 0
    }

    /// Callers still inside (after `beginClosing()`, the ones `close` waits for).
    var callersInside: Int {
        state.load(ordering: .acquiring) & ~Self.closingFlag
    }
}
