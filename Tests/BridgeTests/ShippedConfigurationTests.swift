import Bridge
import Testing

/// The example configuration in `config/` must stay valid as the code changes.
@Suite struct ShippedConfigurationTests {
    static let root: String = {
        // Tests/BridgeTests/<file> → package root
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    @Test func exampleConfigurationParsesWithItsDefaults() throws {
        let configuration = try BridgeConfiguration.load(path: Self.root + "/config/bridge.yaml", environment: [:])
        #expect(configuration.kafka.brokers == "localhost:9092")
        #expect(configuration.kafka.topics == ["apns.requests"])
        #expect(configuration.kafka.resultsTopic == "apns.results")
        #expect(configuration.apps.map(\.name) == ["chat"])
        #expect(configuration.apps.first?.connections == 2)
        #expect(configuration.limits.maxInFlight == 20000)
        #expect(configuration.shutdownTimeout == .seconds(30))
    }

    @Test func exampleConfigurationReadsTheEnvironment() throws {
        let configuration = try BridgeConfiguration.load(
            path: Self.root + "/config/bridge.yaml",
            environment: ["KAFKA_BROKERS": "kafka-1:9092,kafka-2:9092", "APNS_KEY_ID": "KEYID12345"]
        )
        #expect(configuration.kafka.brokers == "kafka-1:9092,kafka-2:9092")
        guard case .token(_, let keyID, _)? = configuration.apps.first?.auth else {
            Issue.record("expected token auth")
            return
        }
        #expect(keyID == "KEYID12345")
    }
}
