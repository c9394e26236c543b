#if canImport(Glibc)
import Glibc
#endif
import HTTP2
import Dispatch
import COpenSSL
import Observability
import Synchronization

/// A TLS + HTTP/2 (ALPN "h2") server: accepts on one loop of `group`, runs each connection on
/// `group.next()`, and hands complete requests to `handler` on the connection's loop.
///
/// Thread ownership: the listening socket belongs to the accepting loop; each connection belongs
/// to its own loop. `port`, `setMaxConcurrentStreams` and `close` are safe from any thread; the
/// set of open connections is shared under a mutex (touched per connection, not per request).
public final class HTTP2Server: EventLoopIOHandler, @unchecked Sendable {
    private struct Shared {
        var connections: [ObjectIdentifier: HTTP2ServerConnection] = [:]
        var maxConcurrentStreams: Int
        var initialMaxConcurrentStreams: Int?
        var closed = false
    }

    /// The time a new connection has for its TLS handshake and HTTP/2 preface by default.
    public static let defaultPrefaceTimeout: Duration = .seconds(10)

    /// Descriptors the default connection limit leaves to everything else (files, the loops'
    /// own descriptors, the listening socket).
    static let reservedDescriptors = 256

    /// The connection limit that keeps the process's descriptors from running out: its soft
    /// `RLIMIT_NOFILE` less ``reservedDescriptors`` (at least 16, at most 1,000,000).
    public static var defaultMaxConnections: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else {  // RLIM_INFINITY
            return 1_000_000
        }
        return min(1_000_000, max(16, Int(clamping: limit.rlim_cur) - reservedDescriptors))
    }

    /// The most connections open at once (see ``init(host:port:tls:group:maxConcurrentStreams:maxConnections:requestBodyLimit:prefaceTimeout:handler:)``).
    public let maxConnections: Int

    /// The bound port (the ephemeral one when created with port 0).
    public let port: Int
    private let tls: TLSServerContext
    private let group: EventLoopGroup
    private let handler: HTTP2ServerHandler
    private let requestBodyLimit: HTTP2RequestBodyLimit
    private let prefaceTimeout: Duration
    private let observer: HTTP2ServerObserver?
    private let acceptLoop: EventLoop
    private let listenFD: Int32
    private let shared: Locked<Shared>
    private let logger = Logger(label: "http2.server")
    /// Connections refused at the limit so far (the accepting loop only).
    private var refusedConnections = 0

    /// Binds and listens (SO_REUSEADDR) on `host`:`port`; port 0 picks an ephemeral port.
    ///
    /// - Parameters:
    ///   - maxConcurrentStreams: SETTINGS_MAX_CONCURRENT_STREAMS announced to clients.
    ///   - maxConnections: the most connections open at once (at least 1). At the limit a new
    ///     connection takes the place of the one without a request being answered for the
    ///     longest time (closed with GOAWAY), or, when a request is being answered on every
    ///     connection, is closed at once; so idle clients, or clients that only start requests,
    ///     cannot use up the descriptors and lock everyone else out.
    ///   - requestBodyLimit: what happens to a request body longer than the server keeps.
    ///   - prefaceTimeout: how long an accepted connection has to finish its TLS handshake and
    ///     send the HTTP/2 connection preface (its first SETTINGS) before it is closed, so clients
    ///     that connect and send nothing cannot hold sockets forever.
    /// - Throws: ``HTTP2Error`` when the address cannot be resolved or bound.
    public init(host: String, port: Int, tls: TLSServerContext, group: EventLoopGroup,
                maxConcurrentStreams: Int, maxConnections: Int = HTTP2Server.defaultMaxConnections,
                requestBodyLimit: HTTP2RequestBodyLimit = .standard,
                prefaceTimeout: Duration = HTTP2Server.defaultPrefaceTimeout,
                handler: HTTP2ServerHandler) throws {
        let address = try SocketAddress.resolve(host: host, port: port, passive: true)[0]
        let listenFD = try address.listen(backlog: 1024)
        self.listenFD = listenFD
        self.port = SocketAddress.localPort(of: listenFD)
        self.tls = tls
        self.group = group
        self.handler = handler
        self.requestBodyLimit = requestBodyLimit
        self.prefaceTimeout = prefaceTimeout
        self.maxConnections = max(1, maxConnections)
        self.observer = handler as? HTTP2ServerObserver
        self.acceptLoop = group.next()
        self.shared = Locked(Shared(maxConcurrentStreams: maxConcurrentStreams))
        let acceptLoop = self.acceptLoop
        acceptLoop.execute { [self] in
            do {
                try acceptLoop.register(fd: listenFD, interest: .readable, handler: self)
            } catch {
                logger.error("cannot watch the listening socket", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Sends SETTINGS with the new SETTINGS_MAX_CONCURRENT_STREAMS on every open connection
    /// (each on its own loop); new connections announce it too.
    public func setMaxConcurrentStreams(_ value: Int) {
        let connections = shared.withLock { shared -> [HTTP2ServerConnection] in
            shared.maxConcurrentStreams = value
            return Array(shared.connections.values)
        }
        for connection in connections {
            connection.loop.execute { connection.serverMaximumDidChange(value) }
        }
    }

    /// The SETTINGS_MAX_CONCURRENT_STREAMS announced to clients (set by `setMaxConcurrentStreams`).
    public var maxConcurrentStreams: Int {
        shared.withLock { $0.maxConcurrentStreams }
    }

    /// Connections accepted and not closed yet (handshaking, open or suspended). Any thread.
    public var openConnectionCount: Int {
        shared.withLock { $0.connections.count }
    }

    /// Makes new connections announce `value` instead of the maximum until the handler raises
    /// them (``HTTP2ServerConnection/raiseConcurrentStreamLimit()``), as APNs does with 1 stream
    /// until it has seen a valid provider token; nil announces the maximum from the start.
    func setInitialMaxConcurrentStreams(_ value: Int?) {
        shared.withLock { $0.initialMaxConcurrentStreams = value }
    }

    /// Stops listening and closes every connection (GOAWAY, then the socket). Idempotent.
    ///
    /// Called off the group's loops, it waits (up to 5 s) until that is done.
    public func close() {
        let connections = shared.withLock { shared -> [HTTP2ServerConnection]? in
            guard !shared.closed else { return nil }
            shared.closed = true
            return Array(shared.connections.values)
        }
        guard let connections else { return }
        let done = DispatchSemaphore(value: 0)
        let listenFD = self.listenFD, acceptLoop = self.acceptLoop
        acceptLoop.execute {
            acceptLoop.unregister(fd: listenFD)
            Glibc.close(listenFD)
            done.signal()
        }
        for connection in connections {
            connection.loop.execute {
                connection.close()
                done.signal()
            }
        }
        guard !group.loops.contains(where: { $0.inEventLoop }) else { return }
        for _ in 0...connections.count {
            if done.wait(timeout: .now() + .seconds(5)) == .timedOut { break }
        }
    }

    /// Accepts every pending connection (the listening socket is readable).
    package func eventLoopReadable() {
        while true {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                let error = errno
                if error == EINTR || error == ECONNABORTED { continue }
                if error != EAGAIN && error != EWOULDBLOCK {
                    logger.warning("accept failed", metadata: ["errno": "\(error)", "detail": "\(String(cString: strerror(error)))"])
                    // Out of descriptors: the connection waits in the backlog; retried in a moment
                    // rather than on every wait of the loop.
                    if EventLoop.isResourceExhaustion(error) { acceptLoop.pauseAccepting(fd: listenFD) }
                }
                return
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            SocketAddress.setNoDelay(fd)
            let ssl: OpaquePointer
            do { ssl = try tls.makeSSL() } catch {
                Glibc.close(fd)
                logger.error("cannot create a TLS session", metadata: ["error": "\(error)"])
                continue
            }
            let loop = group.next()
            let admission = shared.withLock { shared -> Admission in
                guard !shared.closed else { return .serverClosed }
                var evicted: HTTP2ServerConnection?
                if shared.connections.count >= maxConnections {
                    guard let idlest = Self.idleLongest(in: shared.connections.values) else { return .refused }
                    idlest.evicted.store(true, ordering: .relaxed)
                    evicted = idlest
                }
                let connection = HTTP2ServerConnection(
                    fd: fd, ssl: ssl, loop: loop, server: self, handler: handler, observer: observer,
                    maxConcurrentStreams: shared.maxConcurrentStreams,
                    initialMaxConcurrentStreams: shared.initialMaxConcurrentStreams,
                    requestBodyLimit: requestBodyLimit, prefaceTimeout: prefaceTimeout)
                shared.connections[ObjectIdentifier(connection)] = connection
                return .admitted(connection, evicting: evicted)
            }
            let accepted: HTTP2ServerConnection
            switch admission {
            case .serverClosed:
                SSL_free(ssl)
                Glibc.close(fd)
                return
            case .refused:
                refusedConnections += 1
                observer?.serverDidRefuseConnection()   // counted before the client can see the close
                SSL_free(ssl)
                Glibc.close(fd)
                if refusedConnections % 1000 == 1 {
                    logger.warning("connection refused: a request is being answered on every open connection",
                                   metadata: ["max_connections": "\(maxConnections)", "refused": "\(refusedConnections)"])
                }
                continue
            case .admitted(let connection, let evicted):
                accepted = connection
                if let evicted {
                    observer?.serverDidEvictIdleConnection()
                    evicted.loop.execute { evicted.closeToMakeRoom() }
                }
            }
            loop.execute { accepted.start() }
        }
    }

    package func eventLoopWritable() {}

    /// What becomes of a connection just accepted.
    private enum Admission {
        case admitted(HTTP2ServerConnection, evicting: HTTP2ServerConnection?)
        case refused
        case serverClosed
    }

    /// The open connection without a request being answered for the longest time, not already
    /// chosen to make room; nil when a request is being answered on every connection.
    private static func idleLongest(in connections: some Sequence<HTTP2ServerConnection>) -> HTTP2ServerConnection? {
        var idlest: (connection: HTTP2ServerConnection, since: UInt64)?
        for connection in connections where !connection.evicted.load(ordering: .relaxed) {
            let since = connection.idleSince.load(ordering: .relaxed)
            if since != 0, since < idlest?.since ?? .max { idlest = (connection, since) }
        }
        return idlest?.connection
    }

    /// Forgets a closed connection. Its loop thread.
    func connectionDidClose(_ connection: HTTP2ServerConnection) {
        _ = shared.withLock { $0.connections.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    deinit {
        if !shared.withLock({ $0.closed }) { Glibc.close(listenFD) }
    }
}
