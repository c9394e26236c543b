#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Observability
import Synchronization

/// Bounds that keep an ``HTTP1Server`` alive under garbage, slow and numerous clients.
public struct HTTP1ServerLimits: Sendable {
    /// Open connections at most. At the limit, the connection that has waited longest for a
    /// request head (idle between requests, silent since it connected, part of a head sent) or
    /// lingered longest after its last answer is closed to make room, so idle, trickling or
    /// never-closing clients cannot lock out a health check; when every connection is busy with
    /// a request, a new one gets a 503 and is closed at once.
    public var maxConnections: Int
    /// The longest request head (request line and headers); longer ones get a 431.
    public var maxHeadBytes: Int
    /// Time for a client to send a complete request head, from its connection or from its first
    /// byte after a previous answer; slower clients are closed (a 408 is attempted).
    public var headTimeout: Duration
    /// How long a kept-alive connection may wait for its next request.
    public var idleTimeout: Duration
    /// Time for a client to take a whole answer; a client that reads slower is closed.
    public var writeTimeout: Duration

    /// The defaults: 64 connections, 8 KiB heads, 5 s for a head, 2 min idle, 10 s to write.
    public init(maxConnections: Int = 64, maxHeadBytes: Int = 8192, headTimeout: Duration = .seconds(5),
                idleTimeout: Duration = .seconds(120), writeTimeout: Duration = .seconds(10)) {
        self.maxConnections = maxConnections
        self.maxHeadBytes = maxHeadBytes
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
        self.writeTimeout = writeTimeout
    }
}

/// A small HTTP/1.1 server (plain TCP) on one ``EventLoop``: for `/metrics` and health checks.
///
/// Every connection lives on the server's loop; the handler is called there too, so it must be
/// quick and must never block. Keep-alive and pipelined requests are served in order, one answer
/// at a time; bodies are refused. Garbage gets a 400 and the connection is closed.
///
/// Thread ownership: the listening socket and every connection belong to `loop`; `port`,
/// `connectionCount`, `rejectedConnectionCount` and `close` are safe from any thread.
public final class HTTP1Server: EventLoopIOHandler, @unchecked Sendable {
    /// The bound port (the ephemeral one when created with port 0).
    public let port: Int
    /// The loop every connection runs on.
    public let loop: EventLoop
    let limits: HTTP1ServerLimits
    let handler: @Sendable (HTTP1Request) -> HTTP1Response
    private let listenFD: Int32
    let logger = Logger(label: "http.server")

    private struct Counts {
        var open = 0
        var rejected = 0
        var closed = false
    }

    private let counts = Locked(Counts())
    private let acceptFailures = Atomic<Int>(0)
    /// Loop-thread only: failures since the last accepted connection (only the first is logged).
    private var acceptFailuresInARow = 0

    /// Fault injection for tests: while set, `accept` fails as in a process out of descriptors
    /// (EMFILE), the connection staying in the backlog. Lowering the real limit would starve
    /// every other thread of the process too.
    package let descriptorsExhausted = Atomic<Bool>(false)

    /// `accept` calls that failed (not for lack of a pending connection).
    package var acceptFailureCount: Int { acceptFailures.load(ordering: .relaxed) }

    /// Out of descriptors or memory: the connection waits in the backlog, and the listening
    /// socket is left alone for a moment (``EventLoop/pauseAccepting(fd:nanoseconds:)``), or the
    /// loop would spin on it.
    private func noteAcceptFailure(_ error: Int32) {
        acceptFailures.add(1, ordering: .relaxed)
        acceptFailuresInARow += 1
        if acceptFailuresInARow == 1 {
            logger.warning("accept failed", metadata: ["errno": "\(error)", "detail": "\(String(cString: strerror(error)))"])
        }
        if EventLoop.isResourceExhaustion(error) {
            loop.pauseAccepting(fd: listenFD)
        }
    }
    /// Loop-thread only.
    private var connections: [ObjectIdentifier: HTTP1ServerConnection] = [:]
    /// Loop-thread only: waits for a request begun so far (orders them, oldest first).
    private var waitsBegun: UInt64 = 0

    /// The order of a wait for a request that begins now. Loop thread.
    func nextWaitOrder() -> UInt64 {
        waitsBegun += 1
        return waitsBegun
    }

    /// At the connection limit: closes the connection that has waited longest for a request
    /// head (nothing or part of one received) or lingered longest, if any. Loop thread.
    private func closeLongestWaitingConnection() {
        var longest: HTTP1ServerConnection?
        for connection in connections.values {
            guard let since = connection.waitingSince else { continue }
            if let current = longest?.waitingSince, current <= since { continue }
            longest = connection
        }
        longest?.close()
    }

    /// Binds and listens (SO_REUSEADDR) on `host`:`port`; port 0 picks an ephemeral port.
    /// - Throws: ``HTTP2Error`` when the address cannot be resolved or bound.
    public init(host: String, port: Int, loop: EventLoop, limits: HTTP1ServerLimits = HTTP1ServerLimits(),
                handler: @escaping @Sendable (HTTP1Request) -> HTTP1Response) throws {
        let address = try SocketAddress.resolve(host: host, port: port, passive: true)[0]
        let listenFD = try address.listen(backlog: 128)
        self.listenFD = listenFD
        self.port = SocketAddress.localPort(of: listenFD)
        self.loop = loop
        self.limits = limits
        self.handler = handler
        loop.execute { [self] in
            do {
                try loop.register(fd: listenFD, interest: .readable, handler: self)
            } catch {
                logger.error("cannot watch the listening socket", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Connections open now.
    public var connectionCount: Int { counts.withLock { $0.open } }

    /// Connections refused because ``HTTP1ServerLimits/maxConnections`` were open.
    public var rejectedConnectionCount: Int { counts.withLock { $0.rejected } }

    /// Stops listening and closes every connection. Idempotent. Called off the loop, it waits
    /// (up to 5 s) until that is done.
    public func close() {
        let first = counts.withLock { counts -> Bool in
            defer { counts.closed = true }
            return !counts.closed
        }
        guard first else { return }
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            loop.unregister(fd: listenFD)
            Glibc.close(listenFD)
            for connection in Array(connections.values) { connection.close() }
            done.signal()
        }
        if !loop.inEventLoop { _ = done.wait(timeout: .now() + .seconds(5)) }
    }

    /// Accepts every pending connection.
    package func eventLoopReadable() {
        loop.preconditionInEventLoop()
        while true {
            let fd = descriptorsExhausted.load(ordering: .relaxed) ? -1 : accept(listenFD, nil, nil)
            if fd < 0 {
                let error = descriptorsExhausted.load(ordering: .relaxed) ? EMFILE : errno
                if error == EINTR || error == ECONNABORTED { continue }
                if error != EAGAIN && error != EWOULDBLOCK {
                    noteAcceptFailure(error)
                }
                return
            }
            acceptFailuresInARow = 0
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            if counts.withLock({ $0.open >= limits.maxConnections }) { closeLongestWaitingConnection() }
            let admitted = counts.withLock { counts -> Bool in
                guard !counts.closed, counts.open < limits.maxConnections else {
                    counts.rejected += 1
                    return false
                }
                counts.open += 1
                return true
            }
            guard admitted else {
                let answer = HTTP1Response.text(503, "too many connections").serialized(includeBody: true, keepAlive: false)
                _ = answer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                Glibc.close(fd)
                continue
            }
            let connection = HTTP1ServerConnection(fd: fd, server: self)
            do {
                try loop.register(fd: fd, interest: .readable, handler: connection)
            } catch {
                Glibc.close(fd)
                counts.withLock { $0.open -= 1 }
                continue
            }
            connections[ObjectIdentifier(connection)] = connection
            connection.start()
        }
    }

    package func eventLoopWritable() {}

    /// A connection closed its socket. Loop thread.
    func connectionDidClose(_ connection: HTTP1ServerConnection) {
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        counts.withLock { $0.open -= 1 }
    }

    deinit {
        if !counts.withLock({ $0.closed }) { Glibc.close(listenFD) }
    }
}
