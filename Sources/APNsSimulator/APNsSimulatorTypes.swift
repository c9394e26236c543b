import APNs
/// One request as the simulator rules see it (an `HTTP2ServerRequest` without transport details).
public struct APNsSimulatorRequest: Sendable {
    /// `:method`.
    public var method: String
    /// `:path`, e.g. `/3/device/<token>`.
    public var path: String
    /// Regular headers, lower-case names (HTTP/2), no pseudo headers.
    public var headers: [(name: String, value: String)]
    /// The body, or its first ``APNsSimulator/keptBodyBytes`` when it was longer.
    public var body: [UInt8]
    /// The body's length as received (what the payload limits are checked against).
    public var bodyLength: Int

    /// Creates a request; `bodyLength` nil means `body.count`.
    public init(method: String = "POST", path: String, headers: [(name: String, value: String)], body: [UInt8],
                bodyLength: Int? = nil) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.bodyLength = bodyLength ?? body.count
    }
}

/// The simulator's answer: what the server sends back on the stream.
public struct APNsSimulatorAnswer: Sendable {
    /// `:status`.
    public var status: Int
    /// Response headers (`apns-id`, optionally `apns-unique-id`).
    public var headers: [(name: String, value: String)]
    /// Empty for 200; `{"reason":"…"}` (plus `"timestamp":ms` for 410) otherwise.
    public var body: [UInt8]
    /// The reason in `body`, for tests and logs; nil for 200.
    public var reason: APNsReason?

    /// Creates an answer.
    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8], reason: APNsReason?) {
        self.status = status
        self.headers = headers
        self.body = body
        self.reason = reason
    }

    /// The value of the first header called `name`.
    public func header(_ name: String) -> String? {
        headers.first(where: { $0.name == name })?.value
    }
}

/// What the simulator knows about the authentication of one client connection.
public struct APNsConnectionAuthState: Sendable {
    /// The subject of the client certificate, for certificate-auth connections (nil: none presented).
    public var clientCertificateSubject: String?
    /// The team of the first valid provider token on this connection; APNs binds a connection to one team.
    public var boundTeamID: String?
    /// The provider token (`authorization` value) the connection uses now.
    public var currentAuthorization: String?
    /// When (Unix seconds) the connection switched to `currentAuthorization`.
    public var currentAuthorizationSince: Int64?
    /// Whether a request on this connection has passed authentication (a provider token or the
    /// client certificate was accepted); requests answered before it ran do not count.
    public var hasAuthenticatedRequest = false

    /// Creates the state of a fresh connection.
    public init(clientCertificateSubject: String? = nil, boundTeamID: String? = nil) {
        self.clientCertificateSubject = clientCertificateSubject
        self.boundTeamID = boundTeamID
    }
}
