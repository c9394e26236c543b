/// Exponential backoff: the n-th consecutive delay is drawn below `min(maximum, initial × 2^(n-1))`.
///
/// Two jitter shapes: *full* jitter (uniform in `0...ceiling`, what contract §6 asks for
/// retries: it spreads a burst of retries best) and *equal* jitter (`ceiling/2` plus uniform in
/// `0...ceiling/2`: a floor that keeps reconnects from ever becoming a tight loop).
public struct APNsBackoff: Sendable, Equatable {
    /// The first ceiling, in nanoseconds.
    public let initialNanoseconds: Int64
    /// The largest ceiling, in nanoseconds.
    public let maximumNanoseconds: Int64

    /// Creates a backoff; `maximum` below `initial` is raised to it; both at least 1 ms.
    public init(initial: Duration, maximum: Duration) {
        let initial = max(initial.nanosecondsClamped, 1_000_000)
        self.initialNanoseconds = initial
        self.maximumNanoseconds = max(maximum.nanosecondsClamped, initial)
    }

    /// The ceiling of the `attempt`-th delay (1-based): doubles from `initial`, capped at `maximum`.
    public func ceilingNanoseconds(attempt: Int) -> Int64 {
        let doublings = max(0, attempt - 1)
        guard doublings < 62 else { return maximumNanoseconds }
        let (value, overflow) = initialNanoseconds.multipliedReportingOverflow(by: Int64(1) << doublings)
        return overflow ? maximumNanoseconds : min(value, maximumNanoseconds)
    }

    /// Full jitter: uniform in `0...ceiling`.
    public func fullJitterNanoseconds(attempt: Int, jitter: APNsJitterSource) -> Int64 {
        Int64(Double(ceilingNanoseconds(attempt: attempt)) * jitter.next())
    }

    /// Equal jitter: at least half the ceiling, at most the ceiling.
    public func equalJitterNanoseconds(attempt: Int, jitter: APNsJitterSource) -> Int64 {
        let ceiling = ceilingNanoseconds(attempt: attempt)
        return ceiling / 2 + Int64(Double(ceiling - ceiling / 2) * jitter.next())
    }
}
