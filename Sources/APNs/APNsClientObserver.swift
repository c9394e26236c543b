/// Watches every answer, retry and connection close of one `APNsClient`, for metrics.
///
/// The client's pool holds it strongly (unlike the delegate, which usually owns the client and
/// is held weakly) and calls it on the pool's event loop thread for every answer, through a
/// constant reference: no weak load and no retain per answer. An implementation must be
/// thread-safe, must not block, and must not own the client (that would be a cycle).
public protocol APNsClientObserver: AnyObject, Sendable {
    /// APNs answered a request, retried or final, `durationNanoseconds` after its stream was
    /// submitted (the pool's monotonic clock).
    func apnsAnswered(status: Int, reason: String?, durationNanoseconds: Int64)
    /// A notification will be sent again because of `cause`.
    func apnsRetrying(_ cause: APNsRetryCause)
    /// One of the pool's connections closed, for `reason` (not reported while the client shuts down).
    func apnsConnectionClosed(_ reason: APNsConnectionCloseReason)
}

extension APNsClientObserver {
    /// Connection closes are not watched unless an observer says so.
    public func apnsConnectionClosed(_ reason: APNsConnectionCloseReason) {}
}
