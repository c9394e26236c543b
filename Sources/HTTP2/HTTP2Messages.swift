/// An HTTP/2 request of the client: always `POST` over `https` to the connection's authority.
public struct HTTP2Request: Sendable {
    /// The `:path`, e.g. `/3/device/<token>`.
    public var path: String
    /// Regular headers: lower-case names, no pseudo headers.
    public var headers: [(name: String, value: String)]
    /// The body; an `[UInt8]` is copy-on-write, so one payload can be shared by many requests.
    public var body: [UInt8]

    /// Creates a request.
    public init(path: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.path = path
        self.headers = headers
        self.body = body
    }
}

/// One header field of a response.
///
/// A struct, not a `(name:, value:)` tuple: the runtime destroys an array of tuples through its
/// generic tuple code, several hundred instructions for every response.
public struct HTTP2HeaderField: Sendable, Equatable {
    /// The name, lower-case as HTTP/2 sends it.
    public var name: String
    /// The value.
    public var value: String

    /// Creates a header field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A complete HTTP/2 response.
public struct HTTP2Response: Sendable {
    /// The `:status`.
    public var status: Int
    /// Regular headers as received (names lower-case), without pseudo headers.
    public var headers: [HTTP2HeaderField]
    /// The body.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [HTTP2HeaderField], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name` (lower-case), or nil.
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

/// Why a stream ended without a response.
public enum HTTP2StreamFailure: Error, Sendable, Equatable {
    /// REFUSED_STREAM, or above the GOAWAY last-stream-id: not processed, safe to retry.
    case refused
    /// RST_STREAM with another error code.
    case reset(code: UInt32)
    /// The connection closed with the stream open: it may or may not have been processed.
    case connectionLost(String)
    /// The per-stream deadline passed (the stream was reset with CANCEL).
    case timeout
}

/// Receives the events of an ``HTTP2ClientConnection``. Every call happens on the connection's
/// loop thread.
public protocol HTTP2ClientConnectionDelegate: AnyObject {
    /// The handshake finished and the server's first SETTINGS arrived: `submit` may be called.
    func connectionDidBecomeReady(_ connection: HTTP2ClientConnection)
    /// A stream submitted with `tag` finished, exactly once per successful `submit`.
    func connection(_ connection: HTTP2ClientConnection, didFinishStream tag: UInt64,
                    result: Result<HTTP2Response, HTTP2StreamFailure>)
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (re-read on every SETTINGS frame), at most
    /// ``HTTP2ClientConnection/maxStreamsPerConnection``.
    func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int)
    /// The connection closed, after every open stream was finished. The last call.
    func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String)
    /// The server acknowledged a PING. Default: nothing.
    func connectionDidReceivePingAcknowledgement(_ connection: HTTP2ClientConnection)
    /// The server sent GOAWAY: no new streams; streams above its last-stream-id finish `.refused`.
    /// Default: nothing.
    func connectionDidReceiveGoAway(_ connection: HTTP2ClientConnection)
}

extension HTTP2ClientConnectionDelegate {
    /// Nothing.
    public func connectionDidReceivePingAcknowledgement(_ connection: HTTP2ClientConnection) {}
    /// Nothing.
    public func connectionDidReceiveGoAway(_ connection: HTTP2ClientConnection) {}
}
