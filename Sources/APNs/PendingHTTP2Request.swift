/// Temporary stand-in for `HTTP2.HTTP2Request` until the HTTP2 module is merged; identical shape.
/// Delete this file after merging.
public struct HTTP2Request: Sendable {
    public var path: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(path: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.path = path
        self.headers = headers
        self.body = body
    }
}
