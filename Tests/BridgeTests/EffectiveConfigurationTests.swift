import Bridge
import Foundation
import YAML
import Testing

/// `check` prints the effective configuration: it must say what the bridge uses and hide secrets.
@Suite struct EffectiveConfigurationTests {
    static let yaml = """
    kafka:
      brokers: [kafka-1:9092, kafka-2:9092]
      group_id: "group: with colon"
      topics: [apns.requests, apns.more]
      consumer: {fetch.min.bytes: "1", sasl.password: hunter2}
      producer: {linger.ms: 5, ssl.key.pem: "-----BEGIN PRIVATE KEY-----"}
    apns:
      production_url: https://127.0.0.1:2197
      ca_file: "/etc/ca files/ca.pem"
      request_timeout: 2500ms
      ping_interval: 2h
      ping_timeout: 3s
      retry: {max_attempts: 7, initial_backoff: 50ms, max_backoff: 1m}
    apps:
      - {name: chat, bundle_id: com.example.chat, environment: sandbox, connections: 3,
         auth: {type: token, key_file: /keys/AuthKey.p8, key_id: ABC123DEFG, team_id: TEAM123456}}
      - {name: "true", bundle_id: com.example.legacy, auth: {type: certificate, cert_file: c.pem, key_file: k.pem}}
      - {name: p12, bundle_id: com.example.p12, auth: {type: certificate, p12_file: c.p12}}
    limits: {max_in_flight: 100, max_tokens_per_request: 10}
    http: {listen: "[::1]:9999"}
    log: {level: trace, format: text}
    shutdown_timeout: 45s
    """

    @Test func theEffectiveConfigurationParsesBackToTheSameConfiguration() throws {
        var original = try BridgeConfiguration.parse(yaml: Self.yaml, environment: [:])
        let printed = original.effectiveYAML()
        let reparsed = try BridgeConfiguration.parse(yaml: printed, environment: [:])
        // Secret librdkafka properties come back redacted; everything else is identical.
        original.kafka.consumer["sasl.password"] = BridgeConfiguration.redacted
        original.kafka.producer["ssl.key.pem"] = BridgeConfiguration.redacted
        #expect(reparsed == original)
        #expect(printed.contains("request_timeout: 2500ms"))
        #expect(printed.contains("ping_interval: 2h"))
        #expect(printed.contains("ping_timeout: 3s"))
        #expect(printed.contains("max_backoff: 1m"))
    }

    /// config/bridge.yaml documents every key: the effective configuration must print each of them.
    @Test func theEffectiveConfigurationHasEveryKeyOfTheDocumentedExample() throws {
        let path = ShippedConfigurationTests.root + "/config/bridge.yaml"
        let documented = try #require(try YAMLParser.parse(try String(contentsOfFile: path, encoding: .utf8)))
        let configuration = try BridgeConfiguration.load(path: path, environment: [:])
        let printed = try #require(try YAMLParser.parse(configuration.effectiveYAML()))
        let missing = Self.keyPaths(documented).subtracting(Self.keyPaths(printed))
        #expect(missing.isEmpty, "keys of config/bridge.yaml missing from the effective configuration: \(missing.sorted())")
    }

    /// Key paths of mappings (`apns.retry.max_attempts`, `apps[].auth.type`), without the
    /// librdkafka pass-through maps' own keys.
    static func keyPaths(_ node: YAMLNode, prefix: String = "") -> Set<String> {
        switch node {
        case .mapping(let entries, _):
            var paths: Set<String> = []
            for entry in entries {
                guard let key = entry.key.scalarValue else { continue }
                let path = prefix.isEmpty ? key : prefix + "." + key
                paths.insert(path)
                if path != "kafka.consumer" && path != "kafka.producer" {
                    paths.formUnion(keyPaths(entry.value, prefix: path))
                }
            }
            return paths
        case .sequence(let items, _):
            return items.reduce(into: Set<String>()) { $0.formUnion(keyPaths($1, prefix: prefix + "[]")) }
        case .scalar:
            return []
        }
    }

    @Test func passphrasesAndSecretPropertiesAreRedacted() throws {
        let configuration = try BridgeConfiguration.parse(yaml: """
        kafka: {brokers: k:9092, producer: {sasl.password: kafka-pass, ssl.key.password: key-pass, sasl.pasword: typo-pass, linger.ms: 7}}
        apps:
          - {name: a, bundle_id: b, auth: {type: certificate, cert_file: c.pem, key_file: k.pem, passphrase: "${PASS}"}}
          - {name: p, bundle_id: b, auth: {type: certificate, p12_file: c.p12, passphrase: p12-pass}}
        """, environment: ["PASS": "pem-pass"])
        let printed = configuration.effectiveYAML()
        // A name librdkafka does not know (`check` refuses it) may be a mistyped secret.
        for secret in ["kafka-pass", "key-pass", "pem-pass", "p12-pass", "typo-pass"] {
            #expect(!printed.contains(secret))
        }
        #expect(printed.components(separatedBy: "\"<redacted>\"").count - 1 == 5)
        #expect(printed.contains("linger.ms: \"7\"") || printed.contains("linger.ms: 7"))
    }

    /// Properties librdkafka knows are shown as given, also text properties without a default,
    /// which librdkafka 2.0.2 reports as unknown when their value is read.
    @Test func knownPropertiesWithoutADefaultAreShownAsGiven() throws {
        let configuration = try BridgeConfiguration.parse(yaml: """
        kafka: {brokers: k:9092, consumer: {ssl.ca.location: /etc/ssl/ca.pem, sasl.username: svc-apns, client.rack: eu-west-1a,
                group.instance.id: bridge-0, topic.message.timeout.ms: 1000}}
        apps: [{name: a, bundle_id: b, auth: {type: certificate, cert_file: c.pem, key_file: k.pem}}]
        """, environment: [:])
        let printed = configuration.effectiveYAML()
        for shown in ["/etc/ssl/ca.pem", "svc-apns", "eu-west-1a", "bridge-0", "1000"] {
            #expect(printed.contains(shown), "\(shown) redacted")
        }
        #expect(!printed.contains(BridgeConfiguration.redacted))
        #expect(BridgeConfiguration.isSecretKafkaProperty("sasl.pasword"))
        #expect(BridgeConfiguration.isSecretKafkaProperty("topic.no.such.property"))
    }

    /// A `${…}` reference in a property that holds no secret names its variable when unset.
    @Test func anUnsetVariableInAKnownPropertyIsNamed() {
        #expect {
            _ = try BridgeConfiguration.parse(yaml: """
            kafka: {brokers: k:9092, consumer: {ssl.ca.location: "${KAFKA_CA_FILE}"}}
            apps: [{name: a, bundle_id: b, auth: {type: certificate, cert_file: c.pem, key_file: k.pem}}]
            """, environment: [:])
        } throws: { error in
            "\(error)".contains("KAFKA_CA_FILE") && "\(error)".contains("kafka.consumer.ssl.ca.location")
        }
    }
}
