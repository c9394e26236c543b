/// The Kafka timestamp of an input record, as far as `latency_ms` can use it (contract §3).
///
/// A timestamp is input like any other: a producer may set none, or one years away. One that is
/// missing or more than a day away from the bridge's clock is unusable and gives
/// `latency_ms: null`; the arithmetic reports overflow instead of trapping, whatever the value.
enum RecordTimestamp {
    /// How far a usable timestamp may be from the bridge's clock: one day.
    static let maximumSkewMilliseconds: Int64 = 86_400_000

    /// `timestamp` when it is within a day of `nowMilliseconds`, else nil.
    static func usable(_ timestamp: Int64?, nowMilliseconds: Int64) -> Int64? {
        guard let timestamp else { return nil }
        let (difference, overflow) = nowMilliseconds.subtractingReportingOverflow(timestamp)
        guard !overflow, difference.magnitude <= UInt64(maximumSkewMilliseconds) else { return nil }
        return timestamp
    }

    /// Milliseconds from `startedAtMilliseconds` to `nowMicroseconds`, or nil when there is no
    /// usable start (or the difference does not fit, which a usable start cannot cause).
    static func latencyMilliseconds(from startedAtMilliseconds: Int64?, nowMicroseconds: Int64) -> Double? {
        guard let startedAtMilliseconds else { return nil }
        let (startMicroseconds, scaleOverflow) = startedAtMilliseconds.multipliedReportingOverflow(by: 1000)
        let (elapsed, differenceOverflow) = nowMicroseconds.subtractingReportingOverflow(startMicroseconds)
        guard !scaleOverflow, !differenceOverflow else { return nil }
        return Double(elapsed) / 1000
    }
}
