import APNs
import Kafka
import Observability

/// The effective configuration as YAML, for `apns-bridge check`: every key with the value the
/// bridge uses (defaults filled in, `${VAR}` expanded), secrets redacted.
///
/// Passphrases print as `<redacted>`; librdkafka properties whose name says they hold a secret
/// (`sasl.password`, `ssl.key.password`, `ssl.key.pem`, …) too, and so do properties librdkafka
/// does not know (`check` refuses them, but a mistyped `sasl.pasword` holds a password all the
/// same). Key material is never part of a
/// configuration: only file paths are. Apart from redacted values, the output parses back to
/// the same configuration.
extension BridgeConfiguration {
    /// What a redacted value prints as.
    public static let redacted = "<redacted>"

    /// Whether a librdkafka property's value is not shown: its name says it holds a secret, or
    /// librdkafka does not know the name (a mistyped name may hide a secret).
    public static func isSecretKafkaProperty(_ name: String) -> Bool {
        KafkaPropertyRules.isSecret(name) || !KafkaPropertyRules.isKnown(name)
    }

    /// The effective configuration as YAML (contract §8 layout).
    public func effectiveYAML() -> String {
        var lines: [String] = []
        func add(_ indent: Int, _ key: String, _ value: String? = nil) {
            let prefix = String(repeating: "  ", count: indent) + key + ":"
            lines.append(value.map { prefix + " " + $0 } ?? prefix)
        }
        func text(_ value: String) -> String { YAMLScalar.quoted(value) }
        func properties(_ indent: Int, _ key: String, _ values: [String: String]) {
            guard !values.isEmpty else { return add(indent, key, "{}") }
            add(indent, key)
            for name in values.keys.sorted() {
                let value = Self.isSecretKafkaProperty(name) ? Self.redacted : values[name] ?? ""
                add(indent + 1, text(name), text(value))
            }
        }
        add(0, "kafka")
        add(1, "brokers", text(kafka.brokers))
        add(1, "group_id", text(kafka.groupID))
        add(1, "topics", "[" + kafka.topics.map(text).joined(separator: ", ") + "]")
        add(1, "results_topic", text(kafka.resultsTopic))
        add(1, "invalid_tokens_topic", text(kafka.invalidTokensTopic))
        add(1, "dead_letter_topic", text(kafka.deadLetterTopic))
        add(1, "exactly_once", "\(kafka.exactlyOnce)")
        properties(1, "consumer", kafka.consumer)
        properties(1, "producer", kafka.producer)
        add(0, "apns")
        add(1, "production_url", text(apns.productionURL.description))
        add(1, "sandbox_url", text(apns.sandboxURL.description))
        add(1, "ca_file", apns.caFile.map(text) ?? "null")
        add(1, "request_timeout", DurationText.format(apns.requestTimeout))
        add(1, "ping_interval", DurationText.format(apns.pingInterval))
        add(1, "ping_timeout", DurationText.format(apns.pingTimeout))
        add(1, "retry")
        add(2, "max_attempts", "\(apns.retry.maxAttempts)")
        add(2, "initial_backoff", DurationText.format(apns.retry.initialBackoff))
        add(2, "max_backoff", DurationText.format(apns.retry.maxBackoff))
        add(0, "apps")
        for app in apps {
            add(1, "- name", text(app.name))
            add(2, "bundle_id", text(app.bundleID))
            add(2, "environment", app.environment.rawValue)
            add(2, "connections", "\(app.connections)")
            add(2, "auth")
            switch app.auth {
            case .token(let keyFile, let keyID, let teamID):
                add(3, "type", "token")
                add(3, "key_file", text(keyFile))
                add(3, "key_id", text(keyID))
                add(3, "team_id", text(teamID))
            case .certificate(let certFile, let keyFile, let passphrase):
                add(3, "type", "certificate")
                add(3, "cert_file", text(certFile))
                add(3, "key_file", text(keyFile))
                if passphrase != nil { add(3, "passphrase", text(Self.redacted)) }
            case .certificatePKCS12(let p12File, let passphrase):
                add(3, "type", "certificate")
                add(3, "p12_file", text(p12File))
                if passphrase != nil { add(3, "passphrase", text(Self.redacted)) }
            }
        }
        add(0, "limits")
        add(1, "max_in_flight", "\(limits.maxInFlight)")
        add(1, "max_tokens_per_request", "\(limits.maxTokensPerRequest)")
        add(0, "http")
        add(1, "listen", text(http.host.contains(":") ? "[\(http.host)]:\(http.port)" : "\(http.host):\(http.port)"))
        add(0, "log")
        add(1, "level", log.level.name)
        add(1, "format", log.format.rawValue)
        add(0, "shutdown_timeout", DurationText.format(shutdownTimeout))
        return lines.joined(separator: "\n") + "\n"
    }
}

/// YAML scalars written by the configuration renderer.
enum YAMLScalar {
    /// `value` bare when YAML reads it back as the same string, else double-quoted (JSON escapes,
    /// which YAML's double-quoted style understands).
    static func quoted(_ value: String) -> String {
        let plain = !value.isEmpty && value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "/")
        } && !["true", "false", "null", "yes", "no", "on", "off", "~"].contains(value.lowercased())
            && Double(value) == nil && value.first != "-"
        if plain { return value }
        var output = ""
        JSONText.appendQuoted(value, to: &output)
        return output
    }
}

extension DurationText {
    /// The shortest spelling `parse` reads back as the same duration: `1h`, `5m`, `10s`, `250ms`.
    public static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        for (suffix, unit) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where milliseconds % unit == 0 {
            return "\(milliseconds / unit)\(suffix)"
        }
        return "\(milliseconds)ms"
    }
}
