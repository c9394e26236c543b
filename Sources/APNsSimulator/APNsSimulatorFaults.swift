import APNs

/// Misbehaviour the simulator injects, to prove a client survives Apple on a bad day. All off by
/// default; set at start (``APNsSimulatorConfiguration/faults``) or at run time
/// (``APNsSimulator/setFaults(_:)``, applies to streams received afterwards).
///
/// Every fault is decided per stream on the connection's event loop; delays are loop timers,
/// never sleeps. Stream counts are per connection and include the stream that triggers the fault.
public struct APNsSimulatorFaults: Sendable, Equatable {
    /// Every answer is sent this much later (at most ``maximumLatency``).
    public var latency: Duration
    /// After every N streams received on a connection: GOAWAY (NO_ERROR) naming the N-th stream as
    /// the last one processed; streams up to it are answered, later ones refused, and the
    /// connection closes once drained.
    public var goAwayEveryStreams: Int?
    /// On the N-th stream received on a connection: the socket is closed at once (no GOAWAY);
    /// the streams still open are lost.
    public var dropConnectionEveryStreams: Int?
    /// Status → probability that a stream otherwise answered 200 gets this status instead, with
    /// Apple's reason (429 TooManyRequests, 500 InternalServerError, 503 ServiceUnavailable).
    public var failureRates: [Int: Double]
    /// Probability that a stream is never answered.
    public var stallRate: Double
    /// A connection answers N streams; from the (N+1)-th on it stops reading and writing (PINGs
    /// unanswered, nothing sent) while TCP stays up. What the client sends is dropped unread; the
    /// client's close still ends the connection.
    public var halfOpenAfterStreams: Int?
    /// Provider tokens older than this are answered 403 ExpiredProviderToken (APNs: 1 hour, which
    /// is also the most it may be).
    public var jwtMaximumAge: Duration?
    /// New connections announce this SETTINGS_MAX_CONCURRENT_STREAMS until their first request
    /// that passes authentication, then the configured maximum (APNs with token auth: 1).
    public var initialMaxConcurrentStreams: Int?
    /// A connection that switches to another provider token sooner than this after its previous
    /// switch is answered 429 TooManyProviderTokenUpdates (the token is not taken).
    public var tokenUpdateMinimumInterval: Duration?
    /// A hostile or broken answer in place of every 200 (see ``APNsSimulatorHostileAnswer``).
    public var hostileAnswer: APNsSimulatorHostileAnswer?

    /// No faults.
    public init(
        latency: Duration = .zero,
        goAwayEveryStreams: Int? = nil,
        dropConnectionEveryStreams: Int? = nil,
        failureRates: [Int: Double] = [:],
        stallRate: Double = 0,
        halfOpenAfterStreams: Int? = nil,
        jwtMaximumAge: Duration? = nil,
        initialMaxConcurrentStreams: Int? = nil,
        tokenUpdateMinimumInterval: Duration? = nil,
        hostileAnswer: APNsSimulatorHostileAnswer? = nil
    ) {
        self.latency = latency
        self.goAwayEveryStreams = goAwayEveryStreams
        self.dropConnectionEveryStreams = dropConnectionEveryStreams
        self.failureRates = failureRates
        self.stallRate = stallRate
        self.halfOpenAfterStreams = halfOpenAfterStreams
        self.jwtMaximumAge = jwtMaximumAge
        self.initialMaxConcurrentStreams = initialMaxConcurrentStreams
        self.tokenUpdateMinimumInterval = tokenUpdateMinimumInterval
        self.hostileAnswer = hostileAnswer
    }

    /// The statuses `failureRates` may name, with the reason Apple sends for each.
    public static let injectableFailures: [Int: APNsReason] = [
        429: .tooManyRequests,
        500: .internalServerError,
        503: .serviceUnavailable,
    ]

    /// The longest `latency` taken: an hour is far past any client's stream timeout, and a
    /// longer one would overflow the event loop's timer deadline and fire at once.
    public static let maximumLatency = Duration.seconds(3600)

    /// What is wrong with these faults (nil when usable): unknown statuses, probabilities
    /// outside 0...1 or summing above 1, counts below 1, negative durations, a latency above
    /// ``maximumLatency``.
    public var problem: String? {
        for (status, rate) in failureRates.sorted(by: { $0.key < $1.key }) {
            if Self.injectableFailures[status] == nil {
                return "status \(status) cannot be injected (use 429, 500 or 503)"
            }
            if !(0...1).contains(rate) { return "failure rate \(rate) for \(status) is not between 0 and 1" }
        }
        if failureRates.values.reduce(0, +) > 1 { return "failure rates add up to more than 1" }
        if !(0...1).contains(stallRate) { return "stall rate \(stallRate) is not between 0 and 1" }
        let counts = [("goaway-every", goAwayEveryStreams), ("drop-every", dropConnectionEveryStreams),
                      ("half-open-after", halfOpenAfterStreams), ("initial-streams", initialMaxConcurrentStreams)]
        for (name, count) in counts {
            if let count, count < 1 { return "\(name) must be at least 1" }
        }
        for (name, duration) in [("latency", Optional(latency)), ("jwt-max-age", jwtMaximumAge),
                                 ("token-update-interval", tokenUpdateMinimumInterval)] {
            if let duration, duration < .zero { return "\(name) must not be negative" }
        }
        if latency > Self.maximumLatency { return "latency \(latency) is longer than the maximum of 1 hour" }
        // The verifier refuses tokens older than APNs' hour whatever this says: a longer age
        // could only be a promise not kept.
        if let jwtMaximumAge, jwtMaximumAge > .seconds(3600) {
            return "jwt-max-age \(jwtMaximumAge) is longer than APNs' own limit of 1 hour"
        }
        return hostileAnswer?.problem
    }

    /// The injected failure for one stream, given a uniform random `draw` in 0..<1: walks the
    /// statuses in ascending order, each taking its share of the unit interval.
    func injectedFailure(draw: Double) -> (status: Int, reason: APNsReason)? {
        var upper = 0.0
        for (status, rate) in failureRates.sorted(by: { $0.key < $1.key }) {
            upper += rate
            // invariant: `problem` admits only statuses of injectableFailures (checked where faults are set).
            if draw < upper, let reason = Self.injectableFailures[status] { return (status, reason) }
        }
        return nil
    }

    /// Whether any fault that draws random numbers is on.
    var drawsRandomly: Bool { stallRate > 0 || failureRates.values.contains { $0 > 0 } }
}

extension Duration {
    /// Whole seconds (rounded down), for comparisons with the simulator's Unix-seconds clock.
    var wholeSeconds: Int64 { components.seconds }

    /// Nanoseconds, clamped to what an event loop timer takes.
    var loopNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ UInt64(attoseconds / 1_000_000_000)
    }
}

extension APNsSimulatorFaults {
    /// Parses `STATUS:RATE[,STATUS:RATE…]`, e.g. `429:0.05,503:0.01`; nil when malformed (the
    /// statuses and rates are checked by ``problem``).
    public static func parseFailureRates(_ text: String) -> [Int: Double]? {
        var rates: [Int: Double] = [:]
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let status = Int(parts[0]), let rate = Double(parts[1]),
                  rate.isFinite, rates[status] == nil else { return nil }
            rates[status] = rate
        }
        return rates
    }
}
