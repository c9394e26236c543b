import Kafka
import Foundation
import HTTP2
import Observability
import YAML

extension BridgeConfiguration {
    /// What an environment passed to ``load(path:environment:)`` or ``parse(yaml:environment:)``
    /// holds for a variable whose value is not UTF-8: a `${VAR}` naming it is refused, rather than
    /// expanded with its bytes replaced (a passphrase would silently change). No real value can
    /// be equal: it holds a NUL, which the environment's C strings cannot.
    public static let notUTF8EnvironmentValue = "\u{0}value that is not UTF-8"

    /// The largest configuration file read (a real one is a few KB).
    public static let maximumFileBytes = 4 << 20

    /// Reads and validates the YAML file at `path` (cold path; uses Foundation to read the file).
    public static func load(path: String,
                            environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> BridgeConfiguration {
        if let problem = ReadableFile.problem(at: path, maximumBytes: maximumFileBytes) {
            throw ConfigurationError(keyPath: "", message: "cannot read configuration file \(path): \(problem)")
        }
        let text: String
        do {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            guard let decoded = String(validating: bytes, as: UTF8.self) else {
                throw ConfigurationError(keyPath: "", message: "configuration file \(path) is not UTF-8 text")
            }
            text = decoded
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError(keyPath: "", message: "cannot read configuration file \(path): \(error.localizedDescription)")
        }
        return try parse(yaml: text, environment: environment)
    }

    /// The likely cause of a syntax error in `[ ]` or `{ }` on a line holding `${`: YAML reads the
    /// reference's braces as the collection's own. Empty for any other error.
    static func flowStyleHint(_ error: YAMLError, _ yaml: String) -> String {
        guard error.problem.contains("flow"), error.line >= 1,
              let line = yaml.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(error.line - 1).first,
              line.contains("${") else { return "" }
        return "; inside [ ] or { } a ${VAR} reference must be quoted: \"${VAR}\""
    }

    /// Parses and validates configuration YAML. `${VAR}` references are read from `environment`.
    public static func parse(yaml: String,
                             environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> BridgeConfiguration {
        let root: YAMLNode
        do {
            root = try YAMLParser.parse(yaml) ?? .mapping([], position: YAMLPosition(line: 1, column: 1))
        } catch {
            throw ConfigurationError(keyPath: "", message: "invalid YAML: \(error.description)\(flowStyleHint(error, yaml))",
                                     line: error.line)
        }
        let top = try ConfigurationNode(node: root, path: "", environment: environment)
            .mapping(allowed: ["kafka", "apns", "apps", "limits", "http", "log", "shutdown_timeout"])

        let kafka = try parseKafka(top)
        let apns = try parseAPNs(top.optional("apns"))
        let apps = try parseApps(top)
        var limits = LimitsSettings()
        if let node = top.optional("limits") {
            let section = try node.mapping(allowed: ["max_in_flight", "max_tokens_per_request"])
            if let value = section.optional("max_in_flight") { limits.maxInFlight = try value.integer(minimum: 1, maximum: 1_000_000) }
            if let value = section.optional("max_tokens_per_request") { limits.maxTokensPerRequest = try value.integer(minimum: 1, maximum: 100_000) }
        }
        var http = HTTPSettings()
        if let node = top.optional("http") {
            let section = try node.mapping(allowed: ["listen"])
            if let value = section.optional("listen") { (http.host, http.port) = try parseListen(value) }
        }
        var log = LogSettings()
        if let node = top.optional("log") {
            let section = try node.mapping(allowed: ["level", "format"])
            if let value = section.optional("level") { log.level = try value.choice(LogLevelName.allCases).level }
            if let value = section.optional("format") { log.format = try value.choice([.json, .text]) }
        }
        var configuration = BridgeConfiguration(kafka: kafka, apns: apns, apps: apps, limits: limits, http: http, log: log)
        if let value = top.optional("shutdown_timeout") { configuration.shutdownTimeout = try value.duration() }
        return configuration
    }

    static func parseKafka(_ top: ConfigurationMapping) throws(ConfigurationError) -> KafkaSettings {
        guard let node = top.optional("kafka") else {
            throw ConfigurationError(keyPath: "kafka.brokers", message: "required key is missing")
        }
        let section = try node.mapping(allowed: [
            "brokers", "group_id", "topics", "results_topic", "invalid_tokens_topic", "dead_letter_topic",
            "exactly_once", "consumer", "producer",
        ])
        let brokersNode = try section.required("brokers")
        let brokers = try brokersNode.stringList()
        if brokers.isEmpty { throw brokersNode.error("at least one broker is required") }
        var kafka = KafkaSettings(brokers: brokers.joined(separator: ","))
        if let value = section.optional("group_id") { kafka.groupID = try value.name() }
        if let value = section.optional("results_topic") { kafka.resultsTopic = try value.topicName() }
        if let value = section.optional("invalid_tokens_topic") { kafka.invalidTokensTopic = try value.topicName() }
        if let value = section.optional("dead_letter_topic") { kafka.deadLetterTopic = try value.topicName() }
        let topicsNode = section.optional("topics")
        if let topicsNode {
            kafka.topics = try topicsNode.topicNames()
            if kafka.topics.isEmpty { throw topicsNode.error("at least one topic is required") }
        }
        try refuseOutputsAmongInputs(kafka, topicsGiven: topicsNode != nil)
        if let value = section.optional("exactly_once") { kafka.exactlyOnce = try value.bool() }
        if let value = section.optional("consumer") {
            kafka.consumer = try value.stringMap()
            try refuseReserved(kafka.consumer, role: .consumer, keyPath: "kafka.consumer")
        }
        if let value = section.optional("producer") {
            kafka.producer = try value.stringMap()
            try refuseReserved(kafka.producer, role: .producer, keyPath: "kafka.producer")
        }
        return kafka
    }

    /// A request topic that is also an output would read the bridge's own records back: every
    /// dead letter is an unusable request and makes another, without end.
    static func refuseOutputsAmongInputs(_ kafka: KafkaSettings, topicsGiven: Bool) throws(ConfigurationError) {
        let outputs = [("results_topic", kafka.resultsTopic), ("invalid_tokens_topic", kafka.invalidTokensTopic),
                       ("dead_letter_topic", kafka.deadLetterTopic)]
        for (index, topic) in kafka.topics.enumerated() {
            guard let (key, _) = outputs.first(where: { $0.1 == topic }) else { continue }
            throw ConfigurationError(keyPath: topicsGiven ? "kafka.topics[\(index)]" : "kafka.\(key)",
                                     message: "\"\(topic)\" is both a request topic and kafka.\(key): the bridge would read its own records back")
        }
    }

    /// A librdkafka property that carries a delivery guarantee (contract §6) is set by the
    /// bridge; passing one through is an error naming it.
    static func refuseReserved(
        _ properties: [String: String], role: KafkaPropertyRules.Role, keyPath: String
    ) throws(ConfigurationError) {
        for name in properties.keys.sorted() {
            if let reason = KafkaPropertyRules.reservation(of: name, for: role) {
                throw ConfigurationError(keyPath: "\(keyPath).\(name)", message: "cannot be set: \(reason)")
            }
        }
    }

    /// The shortest `apns.ping_interval` and `apns.ping_timeout` accepted.
    static let minimumPingDuration = (value: Duration.seconds(1), text: "1s")
    /// A request deadline under this (`10ms` written for `10s`) would time out every stream.
    static let minimumRequestTimeout = (value: Duration.milliseconds(100), text: "100ms")

    static func parseAPNs(_ node: ConfigurationNode?) throws(ConfigurationError) -> APNsSettings {
        var apns = APNsSettings()
        guard let node else { return apns }
        let section = try node.mapping(allowed: ["production_url", "sandbox_url", "ca_file", "request_timeout", "ping_interval", "ping_timeout", "retry"])
        if let value = section.optional("production_url") { apns.productionURL = try parseEndpoint(value) }
        if let value = section.optional("sandbox_url") { apns.sandboxURL = try parseEndpoint(value) }
        if let value = section.optional("ca_file") { apns.caFile = try value.optionalFilePath() }
        if let value = section.optional("request_timeout") { apns.requestTimeout = try value.duration(minimum: Self.minimumRequestTimeout) }
        // A PING every few milliseconds (`60ms` written for `60s`) would flood APNs, and a PING
        // timeout under a second would replace healthy connections whenever the network is slow:
        // both are refused.
        if let value = section.optional("ping_interval") { apns.pingInterval = try value.duration(minimum: Self.minimumPingDuration) }
        if let value = section.optional("ping_timeout") { apns.pingTimeout = try value.duration(minimum: Self.minimumPingDuration) }
        if let retryNode = section.optional("retry") {
            let retry = try retryNode.mapping(allowed: ["max_attempts", "initial_backoff", "max_backoff"])
            if let value = retry.optional("max_attempts") { apns.retry.maxAttempts = try value.integer(minimum: 1, maximum: 100) }
            if let value = retry.optional("initial_backoff") { apns.retry.initialBackoff = try value.duration() }
            if let value = retry.optional("max_backoff") {
                apns.retry.maxBackoff = try value.duration()
                if apns.retry.maxBackoff < apns.retry.initialBackoff {
                    throw value.error("must not be shorter than apns.retry.initial_backoff")
                }
            } else {
                // Left at its default, it is raised to a longer initial_backoff (as the backoff
                // itself does), so the effective configuration shows what is used.
                apns.retry.maxBackoff = max(apns.retry.maxBackoff, apns.retry.initialBackoff)
            }
        }
        return apns
    }

    /// `https://host[:port][/]` → endpoint.
    static func parseEndpoint(_ node: ConfigurationNode) throws(ConfigurationError) -> APNsEndpoint {
        let expected = "an https URL such as https://api.push.apple.com:443"
        let text = try node.scalarText(expected: expected)
        guard text.hasPrefix("https://") else { throw node.error("expected \(expected), \(node.got(text))") }
        var authority = text.dropFirst("https://".count)
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard let (host, port) = HostPort.split(authority, defaultPort: 443), port >= 1 else {
            throw node.error("expected \(expected), \(node.got(text))")
        }
        return APNsEndpoint(host: host, port: port)
    }

    /// `host:port` for `http.listen`.
    static func parseListen(_ node: ConfigurationNode) throws(ConfigurationError) -> (String, Int) {
        let expected = "host:port such as 127.0.0.1:9464"
        let text = try node.scalarText(expected: expected)
        guard let (host, port) = HostPort.split(Substring(text), defaultPort: nil) else {
            throw node.error("expected \(expected), \(node.got(text))")
        }
        return (host, port)
    }
}

/// `host:port` / `[v6]:port` splitting shared by URLs and listen addresses (and the
/// simulator's `--listen`).
package enum HostPort {
    package static func split(_ text: Substring, defaultPort: Int?) -> (String, Int)? {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil }
        } else {
            host = text
        }
        let forbidden: Set<Character> = ["/", "@", "?", "#", " ", "[", "]"]
        guard !host.isEmpty, !host.contains(where: { forbidden.contains($0) || $0.isNewline }) else { return nil }
        let port: Int
        if let portText {
            guard !portText.isEmpty, portText.allSatisfy(\.isASCII), let value = Int(portText),
                  (0...65535).contains(value) else { return nil }
            port = value
        } else if let defaultPort {
            port = defaultPort
        } else {
            return nil
        }
        host = host.hasPrefix("[") ? host.dropFirst() : host
        return (String(host), port)
    }
}

/// `log.level` spellings.
enum LogLevelName: String, CaseIterable {
    case trace, debug, info, warning, error

    var level: Logger.Level {
        switch self {
        case .trace: .trace
        case .debug: .debug
        case .info: .info
        case .warning: .warning
        case .error: .error
        }
    }
}
