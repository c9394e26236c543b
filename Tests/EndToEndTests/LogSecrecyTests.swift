import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import HTTP2
import Kafka
import Testing
import TestSupport

/// Everything the binary prints and publishes during a full run (trace level, JSON and text) with
/// a token app and a certificate app (its logs, `/metrics`, `/healthz`, `/readyz`, results,
/// invalid-token records and dead letters, keys, values and headers): no key material,
/// passphrase or JWT ever; device tokens only shortened in logs; input that reaches a log line
/// (a request id with line breaks) cannot forge a line.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct LogSecrecyTests {
    static let passphrase = "pass-phrase-that-must-never-be-printed"
    static let forgedLine = "2026-11-30T12:00:00.000Z ERROR [apns-bridge] FORGED line from a request id"

    @Test(arguments: ["json", "text"])
    func aFullRunNeverPrintsSecretsOrUnshortenedTokensAndCannotBeForged(format: String) throws {
        let unregistered = String(repeating: "dd", count: 32)
        let environment = try LocalEnvironment(partitions: 2, unregisteredTokens: [unregistered: 1_700_000_000_000])
        defer { environment.close() }
        let scratch = try ScratchDirectory(prefix: "apns-bridge-secrecy")
        defer { scratch.remove() }
        // The certificate app talks to a second simulator (its sandbox endpoint) that requires
        // client certificates issued by this authority; the token app to the environment's.
        let authority = try CertificateAuthority()
        try authority.writeCertificate(to: scratch.file("client-ca.pem"))
        let client = try authority.issueClientCertificate(commonName: "Apple Push Services: com.example.legacy")
        var certificateSimulatorConfiguration = environment.credentials.simulatorConfiguration()
        certificateSimulatorConfiguration.clientCAFile = scratch.file("client-ca.pem")
        let certificateSimulator = try APNsSimulator(configuration: certificateSimulatorConfiguration)
        try certificateSimulator.start()
        defer { certificateSimulator.close() }
        let clientKeyFile = scratch.file("legacy-key.pem")
        let encryptedKey = try client.encryptedPrivateKeyPEM(passphrase: Self.passphrase)
        try encryptedKey.write(toFile: clientKeyFile, atomically: false, encoding: .utf8)
        chmod(clientKeyFile, 0o600)
        try client.certificatePEM.write(toFile: scratch.file("legacy.pem"), atomically: false, encoding: .utf8)
        let statusPort = try LoopbackPort.unused()
        let config = try TemporaryFile(contents: """
        kafka:
          brokers: \(environment.kafka.bootstrapServers)
          group_id: secrecy-\(format)
          consumer: {session.timeout.ms: 6000, heartbeat.interval.ms: 500, auto.commit.interval.ms: 200}
        apns:
          production_url: https://127.0.0.1:\(environment.simulator.port)
          sandbox_url: https://127.0.0.1:\(certificateSimulator.port)
          ca_file: \(environment.credentials.caFile)
        apps:
          - name: demo
            bundle_id: com.example.demo
            auth: {type: token, key_file: \(environment.credentials.authKeyFile), key_id: \(environment.credentials.keyID), team_id: \(environment.credentials.teamID)}
          - name: legacy
            bundle_id: com.example.legacy
            environment: sandbox
            auth: {type: certificate, cert_file: \(scratch.file("legacy.pem")), key_file: \(clientKeyFile), passphrase: "\(Self.passphrase)"}
        http: {listen: "127.0.0.1:\(statusPort)"}
        log: {level: trace, format: \(format)}
        shutdown_timeout: 10s
        """)

        let tokens = (0..<4).map { String(format: "%064x", 0xabc0 + $0) }
        let forgedID = "forge\\n\(Self.forgedLine)\\r\\u001b[2K"
        let requests: [(key: String, value: String)] = [
            ("a", #"{"id":"plain","app":"demo","tokens":["\#(tokens[0])","\#(tokens[1])"],"payload":{"aps":{"alert":"hi"}}}"#),
            ("b", #"{"id":"\#(forgedID)","app":"demo","token":"\#(unregistered)","payload":{"aps":{}}}"#),
            ("c", #"{"id":"bad-token","app":"demo","tokens":["\#(tokens[2])","xyz"],"payload":{"aps":{}}}"#),
            ("d", #"{"id":"certificate","app":"legacy","token":"\#(tokens[3])","payload":{"aps":{}}}"#),
            ("e", #"{"id":"broken","tokens":["#),
        ]
        try environment.produceRequests(requests.map { DemoWorkload.Record(key: Array($0.key.utf8), value: Array($0.value.utf8)) })

        let run = try CapturedProcess(BridgeBinary.url, ["run", "--config", config.path])
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: 6, timeoutMilliseconds: 60_000
        )
        #expect(results.count == 6)
        let outcomes = Dictionary(results.compactMap { message -> (String, String)? in
            guard let value = message.value,
                  let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any],
                  let id = object["request_id"] as? String, let outcome = object["outcome"] as? String else { return nil }
            return (id + "/" + ((object["token"] as? String) ?? ""), outcome)
        }, uniquingKeysWith: { first, _ in first })
        #expect(outcomes["certificate/\(tokens[3])"] == "delivered", "\(outcomes)")
        #expect(outcomes["plain/\(tokens[0])"] == "delivered", "\(outcomes)")
        let statusPages = ["/metrics", "/healthz", "/readyz"].map { HTTPTestClient.get(port: statusPort, $0) }
        #expect(statusPages[0]?.body.contains("apns_bridge_notifications_total") == true)
        let exit = run.stop()
        #expect(exit == 0)
        let check = try BridgeBinary.run(["check", "--config", config.path])
        #expect(check.status == 0, "\(check.output)\(check.error)")
        let send = try BridgeBinary.run(["send", "--config", config.path, "--app", "demo", "--token", tokens[0], "--payload", #"{"aps":{}}"#])
        #expect(send.status == 0, "\(send.error)")

        let logs = run.errorOutput + run.output + check.error + send.error
        var published: [KafkaMessage] = []
        // Six results; two invalid tokens (the one APNs called unregistered, "xyz" the bridge
        // refused); one dead letter (the broken request).
        for (topic, count) in [(environment.resultsTopic, 6), (environment.invalidTokensTopic, 2), (environment.deadLetterTopic, 1)] {
            let records = try KafkaTopicReader.readToEnd(
                bootstrapServers: environment.kafka.bootstrapServers, topic: topic, timeoutMilliseconds: 30_000)
            #expect(records.count == count, "\(topic)")
            published += records
        }
        let records = published.map { message in
            String(decoding: (message.key ?? []) + (message.value ?? []), as: UTF8.self)
                + message.headers.map { $0.name + String(decoding: $0.value ?? [], as: UTF8.self) }.joined()
        }.joined(separator: "\n")
        let everything = logs + check.output + send.output + records + statusPages.map { $0?.body ?? "" }.joined()
        #expect(run.errorOutput.contains("pipeline started"))
        #expect(run.errorOutput.contains("notification not delivered"))  // the trace run did log per notification
        for secret in SecretScan.pemLines(environment.credentials.authKey.privateKeyPKCS8PEM)
            + SecretScan.pemLines(client.privateKeyPEM) + SecretScan.pemLines(encryptedKey) where secret.count >= 16 {
            #expect(!everything.contains(secret), "key material printed")
        }
        #expect(!everything.contains(Self.passphrase))
        #expect(!everything.contains("eyJ"), "a JWT (or a part of one) was printed")
        for token in tokens + [unregistered] {
            #expect(!logs.contains(token), "a device token was logged unshortened")
        }
        #expect(logs.contains(String(unregistered.prefix(8)) + "…"))

        let lines = run.errorOutput.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(!line.contains("\r") && !line.contains("\u{1b}"))
            if format == "json" {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object?["message"] != nil, "not one JSON object per line: \(line)")
            } else {
                #expect(line.hasPrefix("20") && !line.hasPrefix(Self.forgedLine.prefix(24)), "forged or broken line: \(line)")
            }
        }
        #expect(run.errorOutput.contains("FORGED line from a request id"))  // it was logged, escaped, inside another line
    }

    /// librdkafka quotes configuration values in some of its own texts (here an unparsable
    /// `sasl.oauthbearer.config`): what the bridge logs of them has every secret value redacted.
    @Test func librdkafkasOwnTextsNeverCarryASecretPropertysValue() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let secret = "SECRET-OAUTH-VALUE-42"
        let yaml = environment.configurationYAML(groupID: "secrecy-oauth", producer: [
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "\"true\"", "sasl.oauthbearer.config": "\"principal=bob \(secret)\"",
        ])
        let config = try TemporaryFile(contents: yaml)
        let run = try CapturedProcess(BridgeBinary.url, ["run", "--config", config.path])
        #expect(waitFor(timeout: .seconds(30)) { run.errorOutput.contains("Unrecognized sasl.oauthbearer.config") },
                "\(run.errorOutput.suffix(2000))")
        _ = run.stop()
        #expect(!run.errorOutput.contains(secret), "a secret property's value was logged")
        #expect(run.errorOutput.contains("<redacted>"))
    }
}

/// The binary running with its standard output and error captured to files.
final class CapturedProcess {
    let process = Process()
    private let directory: ScratchDirectory

    /// Starts `executable`; `environment` entries are added to this process's environment.
    init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        directory = try ScratchDirectory(prefix: "apns-bridge-output")
        _ = FileManager.default.createFile(atPath: directory.file("stdout"), contents: nil)
        _ = FileManager.default.createFile(atPath: directory.file("stderr"), contents: nil)
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        process.standardOutput = FileHandle(forWritingAtPath: directory.file("stdout"))
        process.standardError = FileHandle(forWritingAtPath: directory.file("stderr"))
        try process.run()
    }

    deinit {
        if process.processIdentifier != 0 { BridgeBinary.stop(process) }   // reaped, or Foundation keeps it
        directory.remove()
    }

    var output: String { (try? String(contentsOfFile: directory.file("stdout"), encoding: .utf8)) ?? "" }
    var errorOutput: String { (try? String(contentsOfFile: directory.file("stderr"), encoding: .utf8)) ?? "" }

    /// SIGTERM, then the exit status (nil if it did not exit within 30 s).
    func stop() -> Int32? {
        kill(process.processIdentifier, SIGTERM)
        return BridgeBinary.wait(process, seconds: 30)
    }
}
