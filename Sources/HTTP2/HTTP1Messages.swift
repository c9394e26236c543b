/// One HTTP/1.1 request head, as ``HTTP1Server`` hands it to its handler (bodies are refused).
public struct HTTP1Request: Sendable, Equatable {
    /// `GET`, `HEAD`, … (as sent; methods are case-sensitive).
    public var method: String
    /// The path of the request target, without the query.
    public var path: String
    /// The query (after `?`), if any.
    public var query: String?
    /// `HTTP/1.0` or `HTTP/1.1`.
    public var version: String
    /// Header fields in order, names lowercased, values trimmed.
    public var headers: [(name: String, value: String)]

    /// The first value of a header (name in lowercase).
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// Whether the connection stays open after the answer (HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive`).
    var keepsAlive: Bool {
        let connection = header("connection")?.lowercased() ?? ""
        let tokens = connection.split(separator: ",").map { $0.trimmingSpaces() }
        if version == "HTTP/1.0" { return tokens.contains("keep-alive") }
        return !tokens.contains("close")
    }

    public static func == (lhs: HTTP1Request, rhs: HTTP1Request) -> Bool {
        lhs.method == rhs.method && lhs.path == rhs.path && lhs.query == rhs.query && lhs.version == rhs.version
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }
}

/// What an ``HTTP1Server`` handler answers.
public struct HTTP1Response: Sendable {
    /// The status code.
    public var status: Int
    /// `Content-Type`.
    public var contentType: String
    /// The body (not sent for `HEAD`; `Content-Length` always is).
    public var body: [UInt8]
    /// Extra header fields.
    public var headers: [(name: String, value: String)]

    /// A response with a body.
    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8],
                headers: [(name: String, value: String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    /// A plain-text response: `text` and a line feed.
    public static func text(_ status: Int, _ text: String, headers: [(name: String, value: String)] = []) -> HTTP1Response {
        HTTP1Response(status: status, body: Array((text + "\n").utf8), headers: headers)
    }

    /// The status line, headers and (unless `includeBody` is false) body, ready to write.
    func serialized(includeBody: Bool, keepAlive: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reasonPhrase(status))\r\n"
        head += "Content-Type: \(contentType)\r\n"
        head += "Content-Length: \(body.count)\r\n"
        head += "Cache-Control: no-store\r\n"
        for (name, value) in headers {
            head += "\(name): \(value)\r\n"
        }
        head += keepAlive ? "" : "Connection: close\r\n"
        head += "\r\n"
        var bytes = Array(head.utf8)
        if includeBody { bytes += body }
        return bytes
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}
