import HTTP2
/// A complete request received by an ``HTTP2Server``.
public struct HTTP2ServerRequest: Sendable {
    /// `:method`, `:path` and `:authority`.
    public var method: String, path: String, authority: String
    /// Regular headers, without pseudo headers.
    public var headers: [(name: String, value: String)]
    /// The body, or its first bytes when the server keeps no more (``HTTP2RequestBodyLimit/truncate(after:)``).
    public var body: [UInt8]
    /// The body's length as received: more than `body.count` when the server kept only the first bytes.
    public var bodyLength: Int

    /// Creates a request; `bodyLength` nil means `body.count`.
    public init(method: String, path: String, authority: String,
                headers: [(name: String, value: String)], body: [UInt8], bodyLength: Int? = nil) {
        self.method = method
        self.path = path
        self.authority = authority
        self.headers = headers
        self.body = body
        self.bodyLength = bodyLength ?? body.count
    }

    /// The first value of header `name` (lower-case), or nil.
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

/// What an ``HTTP2Server`` does with a request body longer than it keeps.
public enum HTTP2RequestBodyLimit: Sendable, Equatable {
    /// Resets the stream (ENHANCE_YOUR_CALM) once its body passes `above` bytes.
    case reset(above: Int)
    /// Keeps the first `after` bytes, only counts the rest (``HTTP2ServerRequest/bodyLength``)
    /// and hands the request on at the end of the stream.
    case truncate(after: Int)

    /// Without a limit of its own, a server resets bodies above 1 MiB.
    public static let standard = HTTP2RequestBodyLimit.reset(above: 1 << 20)
}

/// Answers the requests of an ``HTTP2Server``.
public protocol HTTP2ServerHandler: AnyObject, Sendable {
    /// Called on the connection's loop thread; answer now or later via `responder` on that same loop.
    func handle(_ request: HTTP2ServerRequest, responder: HTTP2Responder)
}

/// Answers one request stream. Copyable and safe to keep: answering a stream or connection that
/// is already gone does nothing, and answering twice sends only the first response.
public struct HTTP2Responder: Sendable {
    /// The loop that owns the stream.
    public var loop: EventLoop { connection.loop }
    let connection: HTTP2ServerConnection
    let streamID: Int32

    /// Sends the response (status, headers with lower-case names, body). Meant for the loop
    /// thread; called elsewhere, it hops to the loop.
    public func respond(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        if connection.loop.inEventLoop {
            connection.respond(streamID: streamID, status: status, headers: headers, body: body)
        } else {
            let connection = self.connection, streamID = self.streamID
            connection.loop.execute {
                connection.respond(streamID: streamID, status: status, headers: headers, body: body)
            }
        }
    }
}

extension HTTP2Responder {
    /// Runs `send` on the stream's loop after `delay`, unless the stream closes first (the
    /// client resets it, or the connection goes): then `withdrawn` runs instead and nothing of
    /// the answer is kept. Any thread.
    public func respond(after delay: Duration, _ send: @escaping @Sendable () -> Void,
                        ifStreamCloses withdrawn: @escaping @Sendable () -> Void) {
        let connection = self.connection, streamID = self.streamID
        let nanoseconds = delay.loopNanoseconds
        if connection.loop.inEventLoop {
            connection.delayAnswer(streamID: streamID, nanoseconds: nanoseconds, send: send, withdrawn: withdrawn)
        } else {
            connection.loop.execute {
                connection.delayAnswer(streamID: streamID, nanoseconds: nanoseconds, send: send, withdrawn: withdrawn)
            }
        }
    }
}

/// Connection-level events an ``HTTP2ServerHandler`` may also want (counting, fault injection).
/// A handler that conforms is told on the connection's loop thread.
protocol HTTP2ServerObserver: AnyObject {
    /// The TLS handshake finished and the HTTP/2 session exists.
    func serverConnectionDidOpen(_ connection: HTTP2ServerConnection)
    /// A request stream began; `openCount` streams are open on the connection now.
    func serverConnection(_ connection: HTTP2ServerConnection, didOpenStreamWithOpenCount openCount: Int)
    /// A PING arrived; nghttp2 acknowledges it.
    func serverConnectionDidReceivePing(_ connection: HTTP2ServerConnection)
    /// The client acknowledged one of the server's PINGs.
    func serverConnectionDidReceivePingAcknowledgement(_ connection: HTTP2ServerConnection)
    /// The client acknowledged one of the server's SETTINGS.
    func serverConnectionDidReceiveSettingsAcknowledgement(_ connection: HTTP2ServerConnection)
    /// At the connection limit, the connection idle longest is being closed to make room for a
    /// new one (told on the accepting loop's thread).
    func serverDidEvictIdleConnection()
    /// At the connection limit with no idle connection, a new connection was closed at once
    /// (told on the accepting loop's thread).
    func serverDidRefuseConnection()
}
