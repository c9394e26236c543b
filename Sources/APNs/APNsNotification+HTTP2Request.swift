import HTTP2

extension APNsNotification {
    /// Builds the HTTP/2 request: `POST /3/device/<token>` with the APNs headers.
    ///
    /// - Parameter authorization: `bearer <jwt>` for token auth (see `APNsTokenProvider`), or nil
    ///   for certificate auth, where no `authorization` header is sent.
    /// - Parameter includeContentType: adds `content-type: application/json` (APNs does not need it).
    public func makeRequest(authorization: String?, includeContentType: Bool = false) -> HTTP2Request {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(8)
        if let authorization { headers.append((name: "authorization", value: authorization)) }
        headers.append((name: "apns-push-type", value: pushType.rawValue))
        headers.append((name: "apns-priority", value: String(priority)))
        headers.append((name: "apns-topic", value: topic))
        if let expiration { headers.append((name: "apns-expiration", value: String(expiration))) }
        if let collapseID { headers.append((name: "apns-collapse-id", value: collapseID)) }
        if let apnsID { headers.append((name: "apns-id", value: apnsID)) }
        if includeContentType { headers.append((name: "content-type", value: "application/json")) }
        return HTTP2Request(path: "/3/device/" + token, headers: headers, body: payload)
    }
}
