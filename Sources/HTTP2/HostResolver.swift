import Observability

/// Resolves host names for client connections off the event loops, with at most one lookup per
/// host and port at a time in the whole process.
///
/// `getaddrinfo` blocks and cannot be cancelled, so each lookup runs on a thread of its own. A
/// connection attempt ends at its connect deadline even when the resolver hangs, but the lookup's
/// thread does not: one lookup per attempt would leave one more blocked thread (and its stack)
/// behind with every reconnect. Here an attempt for a host and port whose lookup is still running
/// waits for that lookup instead of starting another, and every waiter still there when it
/// finishes gets its result. An attempt that ends first withdraws its wait (``cancel(_:)``), so
/// nothing of it is kept. Nothing is cached: the next attempt after a lookup finished starts a
/// fresh one.
///
/// Thread safety: any thread; the waiters are kept under a lock, completions run on the lookup's
/// thread (or the caller's, when no thread can be started).
package final class HostResolver: Sendable {
    /// A blocking lookup of a host and port (`getaddrinfo` for the shared resolver).
    package typealias Lookup = @Sendable (_ host: String, _ port: Int) throws -> [SocketAddress]
    /// Receives a lookup's result, once.
    package typealias Completion = @Sendable (Result<[SocketAddress], any Error>) -> Void

    /// One caller's wait for a lookup, to withdraw with ``cancel(_:)``.
    package struct Waiter: Sendable, Hashable {
        fileprivate let key: Key
        fileprivate let id: UInt64
    }

    /// What one lookup resolves.
    fileprivate struct Key: Sendable, Hashable {
        let host: String
        let port: Int
    }

    private struct State {
        var lookup: Lookup
        var nextWaiterID: UInt64 = 0
        /// The waiters of every lookup running now: a key is present exactly while its lookup
        /// runs, even when every waiter withdrew.
        var waiters: [Key: [(id: UInt64, completion: Completion)]] = [:]
    }

    /// The resolver every client connection uses.
    package static let shared = HostResolver()

    private let state: Locked<State>

    /// A resolver that runs `lookup` (by default `getaddrinfo`).
    package init(lookup: @escaping Lookup = { host, port in try SocketAddress.resolve(host: host, port: port) }) {
        state = Locked(State(lookup: lookup))
    }

    /// Resolves `host`:`port`, joining the lookup already running for them if there is one.
    /// `completion` runs once with the result, unless the returned wait is cancelled first.
    package func resolve(host: String, port: Int, completion: @escaping Completion) -> Waiter {
        let key = Key(host: host, port: port)
        let (waiter, lookupToStart) = state.withLock { state -> (Waiter, Lookup?) in
            let id = state.nextWaiterID
            state.nextWaiterID &+= 1
            let isRunning = state.waiters[key] != nil
            state.waiters[key, default: []].append((id, completion))
            return (Waiter(key: key, id: id), isRunning ? nil : state.lookup)
        }
        if let lookupToStart { start(lookupToStart, for: key) }
        return waiter
    }

    /// Withdraws a wait: its completion will not run. The lookup itself goes on (it cannot be
    /// stopped) and later callers still join it. Without effect once the result was handed out.
    package func cancel(_ waiter: Waiter) {
        state.withLock { state in
            state.waiters[waiter.key]?.removeAll { $0.id == waiter.id }
        }
    }

    /// Makes lookups started from now on run `lookup` and returns the one it replaces. For tests
    /// that need a resolver that hangs until they let it answer.
    package func replaceLookup(_ lookup: @escaping Lookup) -> Lookup {
        state.withLock { state in
            let previous = state.lookup
            state.lookup = lookup
            return previous
        }
    }

    private func start(_ lookup: @escaping Lookup, for key: Key) {
        do {
            try ThreadStarter.start(name: "dns-\(key.host)", detached: true) {
                let result = Result { try lookup(key.host, key.port) }
                self.finish(key, with: result)
            }
        } catch {
            finish(key, with: .failure(HTTP2Error(.resolution, "cannot start name resolution: \(error)")))
        }
    }

    /// Hands `result` to everyone waiting for the lookup of `key`; the next caller starts afresh.
    private func finish(_ key: Key, with result: Result<[SocketAddress], any Error>) {
        let waiters = state.withLock { $0.waiters.removeValue(forKey: key) ?? [] }
        for waiter in waiters { waiter.completion(result) }
    }
}
