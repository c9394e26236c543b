import HTTP2

extension APNsNotification {
    /// Builds the HTTP/2 request: `POST /3/device/<token>` with the APNs headers.
    ///
    /// - Parameter authorization: `bearer <jwt>` for token auth (see `APNsTokenProvider`), or nil
    ///   for certificate auth, where no `authorization` header is sent.
    /// - Parameter includeContentType: adds `content-type: application/json` (APNs does not need it).
    public func makeRequest(authorization: String?, includeContentType: Bool = false) -> HTTP2Request {
        var fields = APNsRequestFieldList()
        writeRequestFields(into: &fields, authorization: authorization, includeContentType: includeContentType)
        return HTTP2Request(path: fields.path, headers: fields.headers, body: payload)
    }

    /// Submits the request of `makeRequest(authorization:)` on `connection`, its fields written
    /// straight into the connection's header block: no header array, path string or priority
    /// string per notification. Loop thread (the connection's).
    /// - Returns: false when the connection took nothing (see `HTTP2ClientConnection.submit`).
    func submit(on connection: HTTP2ClientConnection, tag: UInt64, authorization: String?) -> Bool {
        var size = APNsRequestFieldSize()
        writeRequestFields(into: &size, authorization: authorization)
        return connection.submit(tag: tag, body: payload, fieldCount: size.fieldCount, byteCount: size.byteCount) { block in
            writeRequestFields(into: &block, authorization: authorization)
        }
    }

    /// The `apns-priority` APNs applies when the header is absent. Sending it anyway would cost
    /// every request one more header to encode on both sides, so it goes out only when it differs.
    static let priorityWhenOmitted = 10

    /// The request's `:path` and headers, in order: the one list of what APNs is sent.
    func writeRequestFields<Sink: APNsRequestFieldSink>(into sink: inout Sink, authorization: String?,
                                                        includeContentType: Bool = false) {
        sink.addPath("/3/device/", token)
        if let authorization { sink.add("authorization", authorization) }
        sink.add("apns-push-type", pushType.rawValue)
        if priority != APNsNotification.priorityWhenOmitted { sink.add("apns-priority", decimal: Int64(priority)) }
        sink.add("apns-topic", topic)
        if let expiration { sink.add("apns-expiration", decimal: expiration) }
        if let collapseID { sink.add("apns-collapse-id", collapseID) }
        if let apnsID { sink.add("apns-id", apnsID) }
        if includeContentType { sink.add("content-type", "application/json") }
    }
}

/// Where an APNs request's fields go: the connection's header block, a count sizing it, or the
/// path and header list of an `HTTP2Request`.
protocol APNsRequestFieldSink {
    /// The `:path`: `prefix` followed by `value`.
    mutating func addPath(_ prefix: StaticString, _ value: String)
    mutating func add(_ name: StaticString, _ value: String)
    mutating func add(_ name: StaticString, decimal value: Int64)
}

extension HeaderBlock: APNsRequestFieldSink {}

/// Counts the fields and their bytes, to size the header block.
struct APNsRequestFieldSize: APNsRequestFieldSink {
    private(set) var fieldCount = 0
    private(set) var byteCount = 0

    mutating func addPath(_ prefix: StaticString, _ value: String) {
        count(valueBytes: prefix.utf8CodeUnitCount + value.utf8.count)
    }

    mutating func add(_ name: StaticString, _ value: String) {
        count(valueBytes: value.utf8.count)
    }

    mutating func add(_ name: StaticString, decimal value: Int64) {
        count(valueBytes: HeaderBlock.decimalSize(value))
    }

    /// Static names take no bytes of the block (nghttp2 points at them), so only values count.
    private mutating func count(valueBytes: Int) {
        fieldCount += 1
        byteCount += valueBytes
    }
}

/// Collects the path and headers of an `HTTP2Request`.
struct APNsRequestFieldList: APNsRequestFieldSink {
    private(set) var path = ""
    private(set) var headers: [(name: String, value: String)] = []

    mutating func addPath(_ prefix: StaticString, _ value: String) {
        path = prefix.description + value
    }

    mutating func add(_ name: StaticString, _ value: String) {
        headers.append((name: name.description, value: value))
    }

    mutating func add(_ name: StaticString, decimal value: Int64) {
        headers.append((name: name.description, value: String(value)))
    }
}
