@testable import Bridge
import APNs
import APNsSimulator
import Foundation
import Kafka
import Testing
import TestSupport

/// Passphrases are needed to decrypt keys once, at start: nothing the bridge keeps afterwards
/// holds them (docs/SECURITY.md says what Swift strings cannot guarantee beyond that).
@Suite struct PassphraseLifetimeTests {
    static let passphrase = "correct horse battery staple"

    static func configuration(brokers: String, directory: ScratchDirectory, passphrase: String = passphrase) throws -> BridgeConfiguration {
        let authority = try CertificateAuthority(commonName: "PassphraseLifetimeTests CA")
        let client = try authority.issueClientCertificate(commonName: "Apple Push Services: com.example.legacy")
        try client.certificatePEM.write(toFile: directory.file("legacy.pem"), atomically: false, encoding: .utf8)
        try client.encryptedPrivateKeyPEM(passphrase: Self.passphrase)
            .write(toFile: directory.file("legacy-key.pem"), atomically: false, encoding: .utf8)
        try Data(client.pkcs12(passphrase: Self.passphrase)).write(to: URL(fileURLWithPath: directory.file("legacy.p12")))
        let unreachable = APNsEndpoint(host: "127.0.0.1", port: 9)
        return BridgeConfiguration(
            kafka: KafkaSettings(brokers: brokers),
            apns: APNsSettings(productionURL: unreachable, sandboxURL: unreachable),
            apps: [
                AppSettings(name: "pem", bundleID: "com.example.legacy", auth: .certificate(
                    certFile: directory.file("legacy.pem"), keyFile: directory.file("legacy-key.pem"), passphrase: passphrase)),
                AppSettings(name: "p12", bundleID: "com.example.legacy", auth: .certificatePKCS12(
                    p12File: directory.file("legacy.p12"), passphrase: passphrase)),
            ]
        )
    }

    /// Exactly once, offsets go into the transactions: the consumer never commits on its own
    /// timer, which could send an older offset while a transaction commits.
    @Test func onlyTheAtLeastOnceConsumerCommitsOnItsOwnTimer() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        for exactlyOnce in [false, true] {
            var configuration = try Self.configuration(brokers: "127.0.0.1:9", directory: directory)
            configuration.kafka.exactlyOnce = exactlyOnce
            let pipeline = try BridgePipeline(configuration: configuration)
            #expect(pipeline.consumer.commitsAutomatically == !exactlyOnce)
        }
    }

    @Test func removingPassphrasesKeepsEverythingElse() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var configuration = try Self.configuration(brokers: "k:9092", directory: directory)
        configuration.apps.append(AppSettings(name: "chat", bundleID: "com.example.chat", environment: .sandbox, connections: 3,
                                              auth: .token(keyFile: "/k.p8", keyID: "ABC123DEFG", teamID: "TEAM123456")))
        let stripped = configuration.removingPassphrases()
        #expect(stripped.apps.map(\.name) == ["pem", "p12", "chat"])
        #expect(stripped.apps[0].auth == .certificate(certFile: directory.file("legacy.pem"),
                                                      keyFile: directory.file("legacy-key.pem"), passphrase: nil))
        #expect(stripped.apps[1].auth == .certificatePKCS12(p12File: directory.file("legacy.p12"), passphrase: nil))
        #expect(stripped.apps[2] == configuration.apps[2])
        var restored = stripped
        restored.apps = configuration.apps
        #expect(restored == configuration)
    }

    /// The pipeline loads both certificate apps with their passphrase (a wrong one fails), and
    /// the configuration it keeps for the rest of its life has none.
    @Test(.timeLimit(.minutes(1)))
    func thePipelineKeepsNoPassphrase() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let cluster = try MockKafkaCluster()
        let configuration = try Self.configuration(brokers: cluster.bootstrapServers, directory: directory)
        let pipeline = try BridgePipeline(configuration: configuration)
        #expect(pipeline.configuration.apps.count == 2)
        #expect(pipeline.configuration == configuration.removingPassphrases())
        #expect(!String(reflecting: pipeline.configuration).contains(Self.passphrase))
        pipeline.requestStop()
        #expect(pipeline.run() == 0)

        let wrong = try Self.configuration(brokers: cluster.bootstrapServers, directory: directory, passphrase: "wrong")
        #expect(throws: PipelineError.self) { try BridgePipeline(configuration: wrong) }
    }

    /// Unusable credentials stop the start before Kafka is contacted: an instance started with
    /// a wrong passphrase never joins the group, so it cannot set off a rebalance.
    @Test(.timeLimit(.minutes(1)))
    func aWrongPassphraseStopsTheStartBeforeKafkaIsContacted() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let broker = try UnansweredListener()
        defer { broker.close() }
        let wrong = try Self.configuration(brokers: "127.0.0.1:\(broker.port)", directory: directory, passphrase: "wrong")
        #expect(throws: PipelineError.self) { try BridgePipeline(configuration: wrong) }
        #expect(!broker.hasWaitingConnection, "the pipeline connected to Kafka before it checked its credentials")
    }
}
