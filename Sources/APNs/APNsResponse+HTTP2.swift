import HTTP2

extension APNsResponse {
    /// Parses an `HTTP2Response` from an APNs stream (see `init(status:headers:body:)`).
    public init(_ response: HTTP2Response) {
        self.init(status: response.status, headers: response.headers, body: response.body)
    }
}
