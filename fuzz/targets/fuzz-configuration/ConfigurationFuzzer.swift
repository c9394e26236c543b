import Bridge
import FuzzSupport

/// Arbitrary text as a configuration file: libyaml, the tree builder, `${VAR}` expansion (with a
/// fixed environment) and every section's validation. Anything accepted must describe at least
/// one app and a broker list, and every app must have a decoder entry.
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
        }
    }
}
