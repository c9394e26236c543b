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

    /// Binds and listens (SO_REUSEADDR) on `host`:`port`; port 0 picks an ephemeral port.
    ///
    /// - Parameters:
    ///   - maxConcurrentStreams: SETTINGS_MAX_CONCURRENT_STREAMS announced to clients.
    ///   - requestBodyLimit: what happens to a request body longer than the server keeps.
    ///   - prefaceTimeout: how long an accepted connection has to finish its TLS handshake and
    ///     send the HTTP/2 connection preface (its first SETTINGS) before it is closed, so clients
    ///     that connect and send nothing cannot hold sockets forever.
    /// - Throws: ``HTTP2Error`` when the address cannot be resolved or bound.
    public init(host: String, port: Int, tls: TLSServerContext, group: EventLoopGroup,
                maxConcurrentStreams: Int, requestBodyLimit: HTTP2RequestBodyLimit = .standard,
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
            let accepted = shared.withLock { shared -> HTTP2ServerConnection? in
                guard !shared.closed else { return nil }
                let connection = HTTP2ServerConnection(
                    fd: fd, ssl: ssl, loop: loop, server: self, handler: handler, observer: observer,
                    maxConcurrentStreams: shared.maxConcurrentStreams,
                    initialMaxConcurrentStreams: shared.initialMaxConcurrentStreams,
                    requestBodyLimit: requestBodyLimit, prefaceTimeout: prefaceTimeout)
                shared.connections[ObjectIdentifier(connection)] = connection
                return connection
            }
            guard let accepted else {
                SSL_free(ssl)
                Glibc.close(fd)
                return
            }
            loop.execute { accepted.start() }
        }
    }

    package func eventLoopWritable() {}

    /// Forgets a closed connection. Its loop thread.
    func connectionDidClose(_ connection: HTTP2ServerConnection) {
        _ = shared.withLock { $0.connections.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    deinit {
        if !shared.withLock({ $0.closed }) { Glibc.close(listenFD) }
    }
}
