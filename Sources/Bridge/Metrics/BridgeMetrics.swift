import APNs
import Metrics
import Observability

/// Every series of contract §10 for one bridge, on its own registry.
///
/// Label sets are resolved when the bridge starts (per configured app and topic) or on a
/// series' first use (`CounterTable`), never per increment: recording an outcome is a dictionary
/// lookup of the app and one atomic add. Thread-safe.
public final class BridgeMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: MetricsRegistry

    /// APNs round trips: 1 ms to 10 s.
    public static let requestDurationBuckets: [Double] = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]
    /// From the record's Kafka timestamp to the final answer: 5 ms to 10 min (a backlog counts).
    public static let endToEndBuckets: [Double] = [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
    ]

    /// The series of one app. A class: a lookup then retains one object, not each of its
    /// series (a struct of six references copied out of the dictionary retained and released
    /// all six per recorded result).
    final class AppSeries: Sendable {
        /// By `MetricLabels.outcomeIndex` (an array: a dictionary keyed by the enum hashes its raw string).
        let notifications: [Counter]
        let invalidTokens: [Counter]
        let responses: CounterTable
        let retries: CounterTable
        /// By `MetricLabels.connectionCloseReasonIndex`.
        let connectionCloses: [Counter]
        let requestDuration: Histogram
        let endToEndLatency: Histogram

        init(notifications: [Counter], invalidTokens: [Counter], responses: CounterTable, retries: CounterTable,
             connectionCloses: [Counter], requestDuration: Histogram, endToEndLatency: Histogram) {
            self.notifications = notifications
            self.invalidTokens = invalidTokens
            self.responses = responses
            self.retries = retries
            self.connectionCloses = connectionCloses
            self.requestDuration = requestDuration
            self.endToEndLatency = endToEndLatency
        }
    }

    private let apps: NamedLookup<AppSeries>
    /// The same series by pool name (`app/environment`), as the APNs client names itself.
    private let appsByPool: NamedLookup<AppSeries>
    private let consumedByTopic: NamedLookup<Counter>
    private let deadLetters: [Counter]

    /// Declares the families and creates the series of every configured app and topic at zero,
    /// so rates and alerts work from the first scrape.
    public init(configuration: BridgeConfiguration, registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        Self.describeFamilies(registry)
        ProcessMetrics.register(on: registry)
        var apps: [(name: String, value: AppSeries)] = []
        var appsByPool: [(name: String, value: AppSeries)] = []
        for app in configuration.apps {
            let series = Self.makeAppSeries(app.name, registry: registry)
            apps.append((app.name, series))
            for environment in [PushEnvironment.production, .sandbox] {
                appsByPool.append(("\(app.name)/\(environment.rawValue)", series))
            }
        }
        self.apps = NamedLookup(apps)
        self.appsByPool = NamedLookup(appsByPool)
        consumedByTopic = NamedLookup(configuration.kafka.topics.map { topic in
            (topic, Counter(label: "apns_bridge_records_consumed_total", dimensions: [("topic", topic)], registry: registry))
        })
        deadLetters = MetricLabels.deadLetterCodes.map { code in
            Counter(label: "apns_bridge_dead_letters_total", dimensions: [("error", code)], registry: registry)
        }
    }

    private static func makeAppSeries(_ app: String, registry: MetricsRegistry) -> AppSeries {
        let notifications = PushOutcome.allCases.map { outcome in
            Counter(label: "apns_bridge_notifications_total",
                    dimensions: [("app", app), ("outcome", outcome.rawValue)], registry: registry)
        }
        let invalidTokens = MetricLabels.invalidTokenReasons.map { reason in
            Counter(label: "apns_bridge_invalid_tokens_total", dimensions: [("app", app), ("reason", reason)], registry: registry)
        }
        let reasons = MetricLabels.reasonValues
        let responses = CounterTable(count: MetricLabels.statusValues.count * reasons.count) { index in
            Counter(label: "apns_bridge_apns_responses_total", dimensions: [
                ("app", app), ("status", MetricLabels.statusValues[index / reasons.count]),
                ("reason", reasons[index % reasons.count]),
            ], registry: registry)
        }
        for reason in MetricLabels.credentialRefusalReasons {
            _ = responses.counter(at: MetricLabels.responseIndex(status: 403, reason: reason.rawValue))
        }
        let retries = CounterTable(count: MetricLabels.retryCauses.count) { index in
            Counter(label: "apns_bridge_retries_total", dimensions: [("app", app), ("cause", MetricLabels.retryCauses[index])],
                    registry: registry)
        }
        let connectionCloses = MetricLabels.connectionCloseReasons.map { reason in
            Counter(label: "apns_bridge_connection_closes_total", dimensions: [("app", app), ("reason", reason)], registry: registry)
        }
        return AppSeries(
            notifications: notifications, invalidTokens: invalidTokens, responses: responses, retries: retries,
            connectionCloses: connectionCloses,
            requestDuration: Histogram(label: "apns_bridge_apns_request_duration_seconds", dimensions: [("app", app)],
                                       registry: registry),
            endToEndLatency: Histogram(label: "apns_bridge_end_to_end_latency_seconds", dimensions: [("app", app)],
                                       registry: registry)
        )
    }

    // MARK: - Recording (any thread)

    /// One input record was taken from `topic` (consumer thread).
    func recordConsumed(topic: String) {
        if let counter = consumedByTopic[topic] {
            counter.increment()
        } else {
            // A topic outside the configured list (not expected): its series is made on first use.
            Counter(label: "apns_bridge_records_consumed_total", dimensions: [("topic", topic)], registry: registry).increment()
        }
    }

    /// One input record went to the dead-letter topic.
    func recordDeadLetter(_ code: DeadLetterCode) {
        deadLetters[MetricLabels.deadLetterIndex(code)].increment()
    }

    /// One result was published: its outcome, and its end-to-end latency when known.
    func recordResult(app: String, outcome: PushOutcome, latencyMilliseconds: Double?) {
        guard let series = apps[app] else { return }
        series.notifications[MetricLabels.outcomeIndex(outcome)].increment()
        if let latencyMilliseconds, latencyMilliseconds.isFinite, latencyMilliseconds >= 0 {
            series.endToEndLatency.record(latencyMilliseconds / 1000)
        }
    }

    /// One invalid-token record was published.
    func recordInvalidToken(app: String, reason: String) {
        apps[app]?.invalidTokens[MetricLabels.invalidTokenReasonIndex(reason)].increment()
    }

    /// What the pool named `pool` (`app/environment`, as the APNs client names itself) reports
    /// of its answers, retries and connection closes, straight into its app's series; nil for a pool of no
    /// configured app.
    func poolObserver(pool: String) -> APNsClientObserver? {
        appsByPool[pool].map(PoolObserver.init)
    }

    /// The series of one app, held by its pools: an answer costs neither a lookup by name nor
    /// a weak load of the pool's delegate.
    private final class PoolObserver: APNsClientObserver {
        let series: AppSeries

        init(series: AppSeries) {
            self.series = series
        }

        func apnsAnswered(status: Int, reason: String?, durationNanoseconds: Int64) {
            series.responses.increment(at: MetricLabels.responseIndex(status: status, reason: reason))
            // Seconds straight from the integer: a `Duration` costs 128-bit arithmetic to make
            // and to take apart, on every answer.
            series.requestDuration.record(Double(durationNanoseconds) / 1e9)
        }

        func apnsRetrying(_ cause: APNsRetryCause) {
            series.retries.increment(at: MetricLabels.retryCauseIndex(cause))
        }

        func apnsConnectionClosed(_ reason: APNsConnectionCloseReason) {
            if let index = MetricLabels.connectionCloseReasonIndex(reason) {
                series.connectionCloses[index].increment()
            }
        }
    }
}
