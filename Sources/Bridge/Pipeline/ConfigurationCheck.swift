#if canImport(Glibc)
import Glibc
#endif
import Kafka

/// One line of `apns-bridge check`'s report.
public struct ConfigurationFinding: Sendable, Equatable, CustomStringConvertible {
    /// How serious a finding is.
    public enum Severity: String, Sendable, Comparable {
        case ok, warning, error

        public static func < (lhs: Severity, rhs: Severity) -> Bool {
            let order: [Severity] = [.ok, .warning, .error]
            return order.firstIndex(of: lhs)! < order.firstIndex(of: rhs)!  // invariant: both are in `order`
        }
    }

    /// Severity.
    public var severity: Severity
    /// The configuration key it is about, e.g. `apps.chat.auth` or `apns.ca_file`.
    public var subject: String
    /// What was found, without secrets.
    public var message: String

    /// Creates a finding.
    public init(_ severity: Severity, _ subject: String, _ message: String) {
        self.severity = severity
        self.subject = subject
        self.message = message
    }

    /// `warning  apps.chat.auth.key_file: …`
    public var description: String {
        "\(severity.rawValue.padding(8))\(subject): \(message)"
    }
}

/// Everything `apns-bridge check` can verify without connecting to Kafka or APNs: every app's
/// key or certificate loads (a token key signs a provider token; a certificate's key matches
/// it and its passphrase opens it), certificates are valid now and not within 30 days of
/// expiry, the CA file reads, key files are not readable by group or others, and librdkafka
/// accepts every property passed through (without connecting).
public enum ConfigurationCheck {
    /// Certificates that expire sooner than this are reported as a warning: 30 days.
    public static let expiryWarningSeconds: Int64 = 30 * 24 * 3600

    /// Loads every app's key or certificate files and TLS settings.
    /// - Throws: `PipelineError` naming the app (`apps.<name>.auth`) and the problem.
    public static func loadCredentials(_ configuration: BridgeConfiguration) throws(PipelineError) {
        for app in configuration.apps {
            _ = try AppCredentials(app: app, caFile: configuration.apns.caFile)
        }
    }

    /// Runs every check. `now` is Unix seconds (injected so expiry rules are testable).
    public static func run(_ configuration: BridgeConfiguration, now: Int64 = Int64(time(nil))) -> [ConfigurationFinding] {
        var findings: [ConfigurationFinding] = []
        do {
            try validateKafkaProperties(configuration)
            let count = configuration.kafka.consumer.count + configuration.kafka.producer.count
            findings.append(.init(.ok, "kafka", "\(count) pass-through librdkafka propert\(count == 1 ? "y" : "ies") accepted by librdkafka"))
        } catch {
            findings.append(.init(.error, error.keyPath, error.message))
        }
        if let caFile = configuration.apns.caFile {
            findings += checkCAFile(caFile, now: now)
        }
        for app in configuration.apps {
            findings += checkApp(app, now: now)
        }
        return findings
    }

    /// Sets every `kafka.consumer` / `kafka.producer` property on a throwaway librdkafka
    /// configuration (no connection is made), so a misspelt name or a bad value is found by
    /// `check`, not at start; then creates and destroys a producer and a consumer with the
    /// settings the bridge would run with but no broker address, so that what librdkafka only
    /// refuses together (`max.in.flight.requests.per.connection` above 5 with idempotence,
    /// `max.poll.interval.ms` under `session.timeout.ms`) and a periodic commit turned off
    /// (`auto.commit.interval.ms: 0`) are found too.
    /// - Throws: `ConfigurationError` naming the key (`kafka.producer.linger.ms`), or the
    ///   section when only the whole refuses (`kafka.producer`), never a value.
    public static func validateKafkaProperties(_ configuration: BridgeConfiguration) throws(ConfigurationError) {
        let sections: [(KafkaPropertyRules.Role, String, [String: String])] = [
            (.consumer, "kafka.consumer", configuration.kafka.consumer),
            (.producer, "kafka.producer", configuration.kafka.producer),
        ]
        for (role, keyPath, properties) in sections {
            // One at a time, so the error names the key librdkafka refused.
            for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
                do {
                    try KafkaPropertyRules.validate([name: value], for: role)
                } catch {
                    throw ConfigurationError(keyPath: "\(keyPath).\(name)", message: error.message)
                }
            }
        }
        // `apns_bridge_consumer_lag` comes from librdkafka's statistics, which 0 turns off.
        if let interval = configuration.kafka.consumer["statistics.interval.ms"],
           Int(interval.filter { !$0.isWhitespace }) == 0
        {
            throw ConfigurationError(keyPath: "kafka.consumer.statistics.interval.ms",
                                     message: "cannot be 0: it turns off librdkafka's statistics, and with them apns_bridge_consumer_lag")
        }
        let kafka = configuration.kafka
        do {
            try KafkaProducer.checkSettings(
                properties: kafka.producer, queueCapacity: BridgePipeline.producerQueueCapacity(limits: configuration.limits),
                transactionalID: kafka.exactlyOnce ? BridgePipeline.transactionalID(groupID: kafka.groupID) : nil,
                minimumRecordBytes: ResultPublisher.minimumProducerRecordBytes)
        } catch {
            throw ConfigurationError(keyPath: "kafka.producer", message: Self.refusalText(error))
        }
        do {
            try KafkaConsumer.checkSettings(
                groupID: kafka.groupID, properties: BridgePipeline.consumerProperties(kafka), autoCommit: !kafka.exactlyOnce)
        } catch {
            throw ConfigurationError(keyPath: "kafka.consumer", message: Self.refusalText(error))
        }
    }

    /// The reason, without the `KafkaError(...)` wrapping.
    private static func refusalText(_ error: any Error) -> String {
        (error as? KafkaError)?.message ?? "\(error)"
    }
}

extension String {
    /// The string padded with spaces to `width` characters.
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
