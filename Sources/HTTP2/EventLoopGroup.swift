import Synchronization

/// A fixed set of ``EventLoop``s handed out round robin.
///
/// Thread ownership: immutable after `init`; `next()` is safe from any thread.
public final class EventLoopGroup: Sendable {
    /// The loops, one thread each.
    public let loops: [EventLoop]
    private let counter = Atomic<Int>(0)

    /// Starts `threads` loops named `name-0`, `name-1`, ….
    ///
    /// - Throws: ``HTTP2Error`` if a loop cannot be created (loops already started are shut down).
    public init(threads: Int, name: String) throws {
        var loops: [EventLoop] = []
        do {
            for index in 0..<max(1, threads) {
                loops.append(try EventLoop(name: "\(name)-\(index)"))
            }
        } catch {
            for loop in loops { loop.shutdown() }
            throw error
        }
        self.loops = loops
    }

    /// The next loop, round robin.
    public func next() -> EventLoop {
        let index = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        return loops[Int(UInt(bitPattern: index) % UInt(loops.count))]
    }

    /// Shuts every loop down and joins its thread. Idempotent.
    public func shutdown() {
        for loop in loops { loop.shutdown() }
    }
}
