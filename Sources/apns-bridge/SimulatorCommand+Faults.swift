import APNsSimulator
import Bridge

extension SimulatorCommand {
    /// The fault options `apns-bridge simulator` accepts (see `help`).
    static let faultOptions: Set<String> = [
        "latency", "goaway-every", "drop-every", "fail", "stall", "half-open-after", "jwt-max-age",
        "initial-streams", "token-update-interval", "hostile",
    ]

    static let faultHelp = """
      Faults (all off by default; counts are streams per connection):
      --latency DURATION   delay every answer (e.g. 20ms, at most 1h), on the event loop's timers
      --goaway-every N     GOAWAY (NO_ERROR) after every N streams; later streams are refused and
                           the connection closes once drained
      --drop-every N       close the connection abruptly (no GOAWAY) on its N-th stream
      --fail S:R[,S:R…]    answer a share R of otherwise-successful streams with status S and
                           Apple's reason: 429 TooManyRequests, 500 InternalServerError,
                           503 ServiceUnavailable (e.g. 429:0.05,503:0.01)
      --stall R            leave a share R of streams unanswered
      --half-open-after N  answer N streams, then stop reading and writing (PINGs included)
                           while the TCP connection stays open (until the client closes it)
      --jwt-max-age D      answer 403 ExpiredProviderToken to tokens older than D (at most APNs' 1h)
      --initial-streams N  announce N concurrent streams until a connection's first request
                           passes authentication, then --max-streams (APNs with tokens: 1)
      --token-update-interval D
                           answer 429 TooManyProviderTokenUpdates when a connection switches
                           to another token sooner than D after its previous switch
      --hostile MODE       instead of every 200, an answer APNs never sends: unknown-reason,
                           non-json (500 HTML), huge-body:BYTES (400), body-on-200,
                           oversized-header:BYTES (at most 61440), ping-flood:N (at most
                           100000) or settings-flood:N (at most 10000): N frames before each answer
      --client-ca FILE     require a client certificate issued by this CA (certificate auth):
                           requests without a token are accepted for the certificate's bundle id
                           (subject UID, else CN without "Apple Push Services: ") and its
                           .voip/.complication/… topics, 400 TopicDisallowed otherwise

    """

    /// The faults named on the command line.
    static func faults(from options: CommandLineOptions) throws -> APNsSimulatorFaults {
        var faults = APNsSimulatorFaults()
        if let text = options.value("latency") { faults.latency = try duration(text, option: "latency") }
        faults.goAwayEveryStreams = try count(options, "goaway-every")
        faults.dropConnectionEveryStreams = try count(options, "drop-every")
        faults.halfOpenAfterStreams = try count(options, "half-open-after")
        faults.initialMaxConcurrentStreams = try count(options, "initial-streams")
        if let text = options.value("fail") {
            guard let rates = APNsSimulatorFaults.parseFailureRates(text) else {
                throw CommandLineOptions.UsageError(description: "--fail must be STATUS:RATE[,STATUS:RATE…], got '\(text)'")
            }
            faults.failureRates = rates
        }
        if let text = options.value("stall") {
            guard let rate = Double(text), rate.isFinite else {
                throw CommandLineOptions.UsageError(description: "--stall must be a probability, got '\(text)'")
            }
            faults.stallRate = rate
        }
        if let text = options.value("jwt-max-age") { faults.jwtMaximumAge = try duration(text, option: "jwt-max-age") }
        if let text = options.value("token-update-interval") {
            faults.tokenUpdateMinimumInterval = try duration(text, option: "token-update-interval")
        }
        if let text = options.value("hostile") {
            guard let mode = APNsSimulatorHostileAnswer(argument: text) else {
                throw CommandLineOptions.UsageError(
                    description: "--hostile must be \(APNsSimulatorHostileAnswer.argumentSyntax), got '\(text)'")
            }
            faults.hostileAnswer = mode
        }
        if let problem = faults.problem { throw CommandLineOptions.UsageError(description: "simulator faults: \(problem)") }
        return faults
    }

    private static func count(_ options: CommandLineOptions, _ name: String) throws -> Int? {
        guard options.value(name) != nil else { return nil }
        return try options.integer(name, default: 1, in: 1...1_000_000_000)
    }

    private static func duration(_ text: String, option: String) throws -> Duration {
        guard let duration = DurationText.parse(text) else {
            throw CommandLineOptions.UsageError(description: "--\(option) must be a duration like 20ms, 10s, 30m or 1h, got '\(text)'")
        }
        return duration
    }
}
