import Bridge
import FuzzSupport

/// Arbitrary text as a configuration file: libyaml, the tree builder, `${VAR}` expansion (with a
/// fixed environment) and every section's validation. Anything accepted must describe at least
/// one app and a broker list, and its durations must be usable as the bridge uses them: in
/// nanoseconds (UInt64) added to the monotonic clock.
@main
enum ConfigurationFuzzer {
    static let environment = [
        "KAFKA_BROKERS": "kafka-1:9092,kafka-2:9092",
        "EMPTY": "",
        "APNS_KEY_FILE": "/run/secrets/AuthKey.p8",
        "PASSPHRASE": "secret",
        "NESTED": "${KAFKA_BROKERS}",
    ]

    static func main() {
        runFuzzer { bytes in
            guard let configuration = try? BridgeConfiguration.parse(yaml: String(decoding: bytes, as: UTF8.self),
                                                                     environment: environment) else { return }
            precondition(!configuration.apps.isEmpty, "a configuration without apps was accepted")
            precondition(!configuration.kafka.brokers.isEmpty, "a configuration without brokers was accepted")
            _ = PushRequestDecoder(configuration: configuration)
            let durations = [
                ("apns.request_timeout", configuration.apns.requestTimeout),
                ("apns.ping_interval", configuration.apns.pingInterval),
                ("apns.retry.initial_backoff", configuration.apns.retry.initialBackoff),
                ("apns.retry.max_backoff", configuration.apns.retry.maxBackoff),
                ("shutdown_timeout", configuration.shutdownTimeout),
            ]
            for (key, duration) in durations {
                precondition(duration > .zero && duration <= usableDuration, "\(key) \(duration) was accepted")
            }
        }
    }

    /// 2^62 ns (about 146 years): room to add it to a monotonic clock reading in UInt64.
    static let usableDuration = Duration.nanoseconds(Int64(1) << 62)
}
