import APNs
import Bridge
import Foundation
import YAML
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
        #expect(configuration.http.host == "127.0.0.1" && configuration.http.port == 9464)
    }

    /// The Docker image sets `APNS_BRIDGE_HTTP_LISTEN` so that the port it exposes is reachable.
    @Test func theImageListensOnEveryInterfaceWithTheExampleConfiguration() throws {
        let dockerfile = try String(contentsOfFile: Self.root + "/Dockerfile", encoding: .utf8)
        let line = try #require(dockerfile.split(separator: "\n").first { $0.hasPrefix("ENV APNS_BRIDGE_HTTP_LISTEN=") })
        let address = String(line.dropFirst("ENV APNS_BRIDGE_HTTP_LISTEN=".count))
        #expect(dockerfile.contains("EXPOSE 9464"))
        let configuration = try BridgeConfiguration.load(
            path: Self.root + "/config/bridge.yaml", environment: ["APNS_BRIDGE_HTTP_LISTEN": address])
        #expect(configuration.http.host == "0.0.0.0" && configuration.http.port == 9464)
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

/// The other shipped configurations: the demo, the multi-app example and the compose stack's.
@Suite struct ShippedExampleConfigurationTests {
    static let root = ShippedConfigurationTests.root

    @Test func theMultiAppExampleHasTokenAndCertificateApps() throws {
        let configuration = try BridgeConfiguration.load(
            path: Self.root + "/config/multi-app.yaml",
            environment: ["LEGACY_PASSPHRASE": "legacy-pass", "WALLET_PASSPHRASE": "wallet-pass"]
        )
        #expect(configuration.apps.map(\.name) == ["chat", "chat-dev", "legacy", "wallet"])
        #expect(configuration.apps.map(\.environment) == [.production, .sandbox, .production, .production])
        #expect(configuration.apps[0].auth == .token(keyFile: "/run/secrets/AuthKey_ABC123DEFG.p8", keyID: "ABC123DEFG", teamID: "TEAM123456"))
        #expect(configuration.apps[2].auth == .certificate(certFile: "/run/secrets/legacy-cert.pem", keyFile: "/run/secrets/legacy-key.pem",
                                                           passphrase: "legacy-pass"))
        #expect(configuration.apps[3].auth == .certificatePKCS12(p12File: "/run/secrets/wallet.p12", passphrase: "wallet-pass"))
        #expect(throws: ConfigurationError.self) {
            try BridgeConfiguration.load(path: Self.root + "/config/multi-app.yaml", environment: [:])
        }
    }

    @Test func theDemoConfigurationPointsAtTheSimulatorsCredentials() throws {
        let configuration = try BridgeConfiguration.load(path: Self.root + "/config/demo.yaml",
                                                         environment: ["APNS_BRIDGE_DEMO_DIR": "/tmp/x"])
        #expect(configuration.apns.caFile == "/tmp/x/ca.pem")
        #expect(configuration.apns.sandboxURL.description == "https://127.0.0.1:2197")
        #expect(configuration.apps.first?.auth == .token(keyFile: "/tmp/x/AuthKey_ABC123DEFG.p8", keyID: "ABC123DEFG", teamID: "TEAM123456"))
        #expect("\(configuration.log.format)" == "text")
    }

    /// The compose stack's bridge reads what its simulator generates into the shared volume.
    @Test func theComposeConfigurationMatchesTheComposeFile() throws {
        let configuration = try BridgeConfiguration.load(path: Self.root + "/deploy/compose/bridge.yaml", environment: [:])
        let compose = try #require(try YAMLParser.parse(try String(contentsOfFile: Self.root + "/docker-compose.yml", encoding: .utf8)))
        let services = try #require(compose["services"])
        let bridge = try #require(services["apns-bridge"])
        let waitFor = try #require(bridge["environment"]?["APNS_BRIDGE_WAIT_FOR"]?.scalarValue).split(separator: " ").map(String.init)
        guard case .token(let keyFile, _, _)? = configuration.apps.first?.auth else {
            Issue.record("expected token auth")
            return
        }
        #expect(Set(waitFor) == [configuration.apns.caFile, keyFile])
        guard case .sequence(let command, _)? = services["apns-simulator"]?["command"] else {
            Issue.record("the simulator service has no command list")
            return
        }
        let arguments = command.compactMap(\.scalarValue)
        let hostname = try #require(arguments.firstIndex(of: "--hostname")).advanced(by: 1)
        #expect(configuration.apns.productionURL.host == arguments[hostname])
        let credentials = try #require(arguments.firstIndex(of: "--credentials")).advanced(by: 1)
        #expect(configuration.apns.caFile == arguments[credentials] + "/ca.pem")
        #expect(configuration.http.host == "0.0.0.0" && configuration.http.port == 9464)
        #expect(configuration.kafka.brokers == "kafka:9092")
    }

    /// Every file the compose files mount from the repository exists (Prometheus' rules and
    /// configuration, Grafana's provisioning and dashboard, the scripts, the bridge configurations).
    @Test(arguments: ["docker-compose.yml", "docker-compose.production.yml"])
    func everyFileTheComposeStackMountsExists(file: String) throws {
        let compose = try #require(try YAMLParser.parse(try String(contentsOfFile: Self.root + "/" + file, encoding: .utf8)))
        guard case .mapping(let services, _)? = compose["services"] else {
            Issue.record("no services in \(file)")
            return
        }
        var mounted = 0
        for service in services {
            guard case .sequence(let volumes, _)? = service.value["volumes"] else { continue }
            for volume in volumes.compactMap(\.scalarValue) where volume.hasPrefix("./") {
                let source = String(volume.dropFirst(2).prefix { $0 != ":" })
                #expect(FileManager.default.fileExists(atPath: Self.root + "/" + source), "\(file): \(volume)")
                mounted += 1
            }
        }
        #expect(mounted > 0)
    }

    @Test func theProductionConfigurationTalksToAppleWithTheSecretKey() throws {
        let environment = ["APNS_KEY_ID": "KEYID12345", "APNS_TEAM_ID": "TEAMID1234", "APNS_BUNDLE_ID": "com.example.chat"]
        let configuration = try BridgeConfiguration.load(path: Self.root + "/deploy/compose/production.yaml", environment: environment)
        #expect(configuration.apns.productionURL == .production)
        #expect(configuration.apns.caFile == nil)
        #expect(configuration.apps.first?.auth == .token(keyFile: "/run/secrets/apns_auth_key", keyID: "KEYID12345", teamID: "TEAMID1234"))
        #expect(configuration.apps.first?.bundleID == "com.example.chat")
        var missing = environment
        missing["APNS_BUNDLE_ID"] = nil
        #expect { try BridgeConfiguration.load(path: Self.root + "/deploy/compose/production.yaml", environment: missing) }
            throws: { ($0 as? ConfigurationError)?.keyPath == "apps[0].bundle_id" }
    }
}
