import APNs
import Observability

/// The whole service configuration (contract §8), with every default filled in.
///
/// Build it with ``load(path:environment:)`` or ``parse(yaml:environment:)``; both validate
/// everything and throw a ``ConfigurationError`` naming the offending key. Only `kafka.brokers`
/// and `apps` (at least one) are required.
public struct BridgeConfiguration: Sendable, Equatable {
    /// `kafka.*`.
    public var kafka: KafkaSettings
    /// `apns.*`.
    public var apns: APNsSettings
    /// `apps[*]`, in file order; names are unique.
    public var apps: [AppSettings]
    /// `limits.*`.
    public var limits: LimitsSettings
    /// `http.*`.
    public var http: HTTPSettings
    /// `log.*`.
    public var log: LogSettings
    /// `shutdown_timeout`: drain time on SIGTERM/SIGINT (default 30s).
    public var shutdownTimeout: Duration

    /// Creates a configuration; the defaults match contract §8.
    public init(kafka: KafkaSettings, apns: APNsSettings = APNsSettings(), apps: [AppSettings],
                limits: LimitsSettings = LimitsSettings(), http: HTTPSettings = HTTPSettings(),
                log: LogSettings = LogSettings(), shutdownTimeout: Duration = .seconds(30)) {
        self.kafka = kafka
        self.apns = apns
        self.apps = apps
        self.limits = limits
        self.http = http
        self.log = log
        self.shutdownTimeout = shutdownTimeout
    }
}

/// `kafka.*`: brokers, topics, and librdkafka pass-through properties.
public struct KafkaSettings: Sendable, Equatable {
    /// `kafka.brokers` (required): librdkafka `bootstrap.servers`, comma separated. A YAML list is joined with commas.
    public var brokers: String
    /// `kafka.group_id` (default `apns-bridge`).
    public var groupID: String
    /// `kafka.topics` (default `[apns.requests]`): the request topics.
    public var topics: [String]
    /// `kafka.results_topic` (default `apns.results`).
    public var resultsTopic: String
    /// `kafka.invalid_tokens_topic` (default `apns.invalid-tokens`).
    public var invalidTokensTopic: String
    /// `kafka.dead_letter_topic` (default `apns.dead-letters`).
    public var deadLetterTopic: String
    /// `kafka.exactly_once` (default false): transactional producer, offsets in the transaction.
    public var exactlyOnce: Bool
    /// `kafka.consumer`: extra librdkafka consumer properties (values given as strings).
    public var consumer: [String: String]
    /// `kafka.producer`: extra librdkafka producer properties (values given as strings).
    public var producer: [String: String]

    /// Creates Kafka settings with the contract's defaults.
    public init(brokers: String, groupID: String = "apns-bridge", topics: [String] = ["apns.requests"],
                resultsTopic: String = "apns.results", invalidTokensTopic: String = "apns.invalid-tokens",
                deadLetterTopic: String = "apns.dead-letters", exactlyOnce: Bool = false,
                consumer: [String: String] = [:], producer: [String: String] = [:]) {
        self.brokers = brokers
        self.groupID = groupID
        self.topics = topics
        self.resultsTopic = resultsTopic
        self.invalidTokensTopic = invalidTokensTopic
        self.deadLetterTopic = deadLetterTopic
        self.exactlyOnce = exactlyOnce
        self.consumer = consumer
        self.producer = producer
    }
}

/// An APNs server address parsed from an `https://host[:port]` URL.
public struct APNsEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// Always `https`.
    public var scheme: String
    /// Host name or IP address (IPv6 without brackets).
    public var host: String
    /// TCP port (default 443).
    public var port: Int

    /// Creates an endpoint.
    public init(host: String, port: Int = 443) {
        self.scheme = "https"
        self.host = host
        self.port = port
    }

    /// Apple's production server, `https://api.push.apple.com:443`.
    public static let production = APNsEndpoint(host: "api.push.apple.com")
    /// Apple's development server, `https://api.sandbox.push.apple.com:443`.
    public static let sandbox = APNsEndpoint(host: "api.sandbox.push.apple.com")

    /// `https://host:port`.
    public var description: String {
        host.contains(":") ? "\(scheme)://[\(host)]:\(port)" : "\(scheme)://\(host):\(port)"
    }
}

/// `apns.retry.*`: how transient failures are retried.
public struct RetrySettings: Sendable, Equatable {
    /// `max_attempts` (default 5): attempts in total, the first included.
    public var maxAttempts: Int
    /// `initial_backoff` (default 100ms).
    public var initialBackoff: Duration
    /// `max_backoff` (default 30s).
    public var maxBackoff: Duration

    /// Creates retry settings with the contract's defaults.
    public init(maxAttempts: Int = 5, initialBackoff: Duration = .milliseconds(100), maxBackoff: Duration = .seconds(30)) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
    }
}

/// `apns.*`: servers, TLS trust, timeouts and retries shared by every app.
public struct APNsSettings: Sendable, Equatable {
    /// `apns.production_url` (default `https://api.push.apple.com:443`).
    public var productionURL: APNsEndpoint
    /// `apns.sandbox_url` (default `https://api.sandbox.push.apple.com:443`).
    public var sandboxURL: APNsEndpoint
    /// `apns.ca_file` (default none: system roots): an extra CA bundle, e.g. a simulator's.
    public var caFile: String?
    /// `apns.request_timeout` (default 10s).
    public var requestTimeout: Duration
    /// `apns.ping_interval` (default 60s).
    public var pingInterval: Duration
    /// `apns.ping_timeout` (default 10s): a PING unacknowledged this long replaces the connection.
    public var pingTimeout: Duration
    /// `apns.retry`.
    public var retry: RetrySettings

    /// Creates APNs settings with the contract's defaults.
    public init(productionURL: APNsEndpoint = .production, sandboxURL: APNsEndpoint = .sandbox, caFile: String? = nil,
                requestTimeout: Duration = .seconds(10), pingInterval: Duration = .seconds(60),
                pingTimeout: Duration = .seconds(10), retry: RetrySettings = RetrySettings()) {
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.caFile = caFile
        self.requestTimeout = requestTimeout
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.retry = retry
    }

    /// The endpoint for an environment.
    public func endpoint(for environment: PushEnvironment) -> APNsEndpoint {
        environment == .production ? productionURL : sandboxURL
    }
}

/// `environment` of an app or a request: the APNs module's type.
public typealias PushEnvironment = APNsEnvironment

/// `limits.*`.
public struct LimitsSettings: Sendable, Equatable {
    /// `limits.max_in_flight` (default 20000): notifications in flight before fetching pauses.
    public var maxInFlight: Int
    /// `limits.max_tokens_per_request` (default 10000).
    public var maxTokensPerRequest: Int

    /// Creates limits with the contract's defaults.
    public init(maxInFlight: Int = 20000, maxTokensPerRequest: Int = 10000) {
        self.maxInFlight = maxInFlight
        self.maxTokensPerRequest = maxTokensPerRequest
    }
}

/// `http.*`: the status endpoint (`/metrics`, `/healthz`, `/readyz`).
public struct HTTPSettings: Sendable, Equatable {
    /// Host part of `http.listen` (default `127.0.0.1`).
    public var host: String
    /// Port part of `http.listen` (default 9464; 0 = ephemeral).
    public var port: Int

    /// Creates HTTP settings with the contract's defaults.
    public init(host: String = "127.0.0.1", port: Int = 9464) {
        self.host = host
        self.port = port
    }
}

/// `log.*`.
public struct LogSettings: Sendable, Equatable {
    /// `log.level` (default info).
    public var level: Logger.Level
    /// `log.format` (default json).
    public var format: LoggingSystem.Format

    /// Creates log settings with the contract's defaults.
    public init(level: Logger.Level = .info, format: LoggingSystem.Format = .json) {
        self.level = level
        self.format = format
    }
}
