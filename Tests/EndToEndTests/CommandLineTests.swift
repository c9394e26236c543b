import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import TestSupport
import Testing

/// Drives the real `apns-bridge` binary as a separate process, as an operator would.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct CommandLineTests {
    @Test func runProcessesRequestsAndExitsZeroOnSIGTERM() throws {
        let workload = DemoWorkload(count: 60, seed: 11)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        try environment.produceRequests(workload.records)
        let configFile = try TemporaryFile(contents: environment.configurationYAML(groupID: "e2e-binary"))

        let process = try BridgeBinary.start(["run", "--config", configFile.path])
        defer { BridgeBinary.stop(process) }

        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: workload.expectedResults, timeoutMilliseconds: 60_000, settleMilliseconds: 500
        )
        #expect(results.count == workload.expectedResults)
        // Offsets are committed on the auto-commit cadence and again at shutdown.
        kill(process.processIdentifier, SIGTERM)
        let exit = BridgeBinary.wait(process, seconds: 30)
        #expect(exit == 0)
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "e2e-binary",
            topic: environment.requestTopic, partitions: environment.partitions
        )
        #expect(committed.values.reduce(0, +) == Int64(workload.records.count))
    }

    @Test func runWarnsAtStartAboutAKeyFileOthersCanRead() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let keyFile = environment.credentials.authKeyFile
        #expect(chmod(keyFile, 0o644) == 0)
        let configFile = try TemporaryFile(contents: environment.configurationYAML(groupID: "e2e-key-mode",
                                                                                  extra: "log: {format: text}"))
        let log = try ScratchDirectory()
        defer { log.remove() }

        let process = try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("bridge.log"))
        defer { BridgeBinary.stop(process) }
        #expect(waitFor(timeout: .seconds(30)) {
            BridgeBinary.count("key file readable by group or others", in: log.file("bridge.log")) == 1
        })
        #expect(BridgeBinary.count("chmod 600", in: log.file("bridge.log")) == 1)
        #expect(BridgeBinary.count("BEGIN PRIVATE KEY", in: log.file("bridge.log")) == 0)
        kill(process.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(process, seconds: 30) == 0)
    }

    /// As `check` does, `run` names a certificate that expires within 30 days at start (and one
    /// no longer valid, as an error): the credentials still load, and APNs would only refuse
    /// them later.
    @Test func runWarnsAtStartAboutACertificateThatExpiresSoon() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let authority = try CertificateAuthority()
        let client = try authority.issueClientCertificate(commonName: "Apple Push Services: com.example.legacy", validDays: 10)
        try client.certificatePEM.write(toFile: directory.file("legacy.pem"), atomically: false, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: directory.file("legacy-key.pem"), atomically: false, encoding: .utf8)
        #expect(chmod(directory.file("legacy-key.pem"), 0o600) == 0)
        let certificateApp = """
          - name: legacy
            bundle_id: com.example.legacy
            auth: {type: certificate, cert_file: \(directory.file("legacy.pem")), key_file: \(directory.file("legacy-key.pem"))}
        """
        let yaml = environment.configurationYAML(groupID: "e2e-expiry", extra: "log: {format: text}")
            .replacingOccurrences(of: "apps:\n", with: "apps:\n" + certificateApp + "\n")
        let configFile = try TemporaryFile(contents: yaml)
        let log = try ScratchDirectory()
        defer { log.remove() }

        let process = try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("bridge.log"))
        defer { BridgeBinary.stop(process) }
        #expect(waitFor(timeout: .seconds(30)) {
            BridgeBinary.count("certificate expires soon", in: log.file("bridge.log")) == 1
        }, "\(BridgeBinary.tail(of: log.file("bridge.log")))")
        #expect(BridgeBinary.count("apps.legacy.auth.cert_file", in: log.file("bridge.log")) >= 1)
        kill(process.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(process, seconds: 30) == 0)
    }

    /// A stop signal that comes while `run` is still setting up (its status listener is bound
    /// early, then the credentials, the Kafka clients and the pool are made) is neither lost nor
    /// the end of the process by the signal's default action: the pipeline stops as soon as it
    /// exists, and the process exits 0.
    @Test func aStopSignalDuringTheSetupStopsTheBridgeCleanly() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        for (round, signalNumber) in [SIGTERM, SIGINT, SIGTERM].enumerated() {
            let port = try LoopbackPort.unused()
            let yaml = environment.configurationYAML(groupID: "early-signal-\(round)")
                .replacingOccurrences(of: "listen: 127.0.0.1:0", with: "listen: 127.0.0.1:\(port)")
            let bridge = try BridgeRunProcess(yaml: yaml)
            // The signal follows the listener's first accepted connection at once.
            #expect(waitFor(timeout: .seconds(30), every: .milliseconds(1)) { (try? HTTPTestClient(port: port)) != nil })
            kill(bridge.process.processIdentifier, signalNumber)
            let status = BridgeBinary.wait(bridge.process, seconds: 30)
            #expect(status == 0 && bridge.process.terminationReason == .exit,
                    "signal \(signalNumber): \(String(describing: status)) \(bridge.logTail)")
        }
    }

    @Test func aSecondSignalStopsAtOnceWithoutCommittingUnfinishedWork() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.produceRequests((0..<3).map { index in
            DemoWorkload.Record(
                key: Array("r\(index)".utf8),
                value: Array(#"{"token":"\#(String(repeating: "3c", count: 32))","payload":{"aps":{}}}"#.utf8)
            )
        })
        let yaml = environment.configurationYAML(groupID: "e2e-second-signal", extra: "log: {level: debug, format: text}")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 60s")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
        let configFile = try TemporaryFile(contents: yaml)
        // APNs takes the notifications and never answers: the drain would wait the whole 60 s.
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        let log = try ScratchDirectory()
        defer { log.remove() }

        let process = try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("bridge.log"))
        defer { BridgeBinary.stop(process) }
        // It joins the group and takes the three requests.
        #expect(waitFor(timeout: .seconds(30)) { BridgeBinary.count("request admitted", in: log.file("bridge.log")) == 3 })
        #expect(process.isRunning)
        kill(process.processIdentifier, SIGTERM)
        #expect(waitFor(timeout: .seconds(10)) { BridgeBinary.count("draining", in: log.file("bridge.log")) == 1 })
        kill(process.processIdentifier, SIGTERM)
        let exit = BridgeBinary.wait(process, seconds: 10)
        #expect(exit == 1)
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "e2e-second-signal",
            topic: environment.requestTopic, partitions: 1
        )
        #expect(committed[0] == nil)
    }

    @Test func checkNamesTheUnknownKeyAndExitsTwo() throws {
        let configFile = try TemporaryFile(contents: """
        kafka:
          brokers: localhost:9092
          group_idd: typo
        apps:
          - {name: chat, bundle_id: com.example.chat, auth: {type: token, key_file: k.p8, key_id: ABC123DEFG, team_id: TEAM123456}}
        """)
        let (status, _, errorOutput) = try BridgeBinary.run(["check", "--config", configFile.path])
        #expect(status == 2)
        #expect(errorOutput.contains("kafka.group_idd"))
    }

    /// Contract §9: without `--config` or `$APNS_BRIDGE_CONFIG`, the configuration is
    /// `config/bridge.yaml` in the working directory.
    @Test func withoutConfigOrItsVariableTheDefaultPathIsRead() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        let script = #"cd "$0" && unset APNS_BRIDGE_CONFIG && exec "$1" check"#
        let missing = try BridgeBinary.runThroughShell(script, [directory.path, BridgeBinary.url.path])
        #expect(missing.status == 2)
        #expect(missing.error.contains("config/bridge.yaml"), "\(missing.error)")
        try FileManager.default.createDirectory(atPath: directory.file("config"), withIntermediateDirectories: true)
        try "kafka: {brokers: localhost:9092, group_id_default_path: x}\n".write(
            toFile: directory.file("config/bridge.yaml"), atomically: true, encoding: .utf8)
        let found = try BridgeBinary.runThroughShell(script, [directory.path, BridgeBinary.url.path])
        #expect(found.status == 2)
        #expect(found.error.contains("kafka.group_id_default_path"), "\(found.error)")
        // Set but empty counts as unset.
        let blank = try BridgeBinary.runThroughShell(#"cd "$0" && APNS_BRIDGE_CONFIG= exec "$1" check"#,
                                                     [directory.path, BridgeBinary.url.path])
        #expect(blank.status == 2)
        #expect(blank.error.contains("kafka.group_id_default_path"), "\(blank.error)")
    }

    @Test func checkHasLibrdkafkaValidateEveryPassedThroughPropertyWithoutConnecting() throws {
        func check(_ kafkaExtra: String, command: String = "check") throws -> (Int32, String) {
            let configFile = try TemporaryFile(contents: """
            kafka:
              brokers: 127.0.0.1:9
            \(kafkaExtra)
            apps:
              - {name: chat, bundle_id: com.example.chat, auth: {type: token, key_file: /nonexistent/k.p8, key_id: ABC123DEFG, team_id: TEAM123456}}
            """)
            let (status, _, errorOutput) = try BridgeBinary.run([command, "--config", configFile.path])
            return (status, errorOutput)
        }
        let misspelt = try check("  producer: {linger.msec: 5}")
        #expect(misspelt.0 == 2)
        #expect(misspelt.1.contains("kafka.producer.linger.msec"))
        // `run` names the key as `check` does, before it opens anything.
        let misspeltAtRun = try check("  producer: {linger.msec: 5}", command: "run")
        #expect(misspeltAtRun.0 == 2)
        #expect(misspeltAtRun.1.contains("kafka.producer.linger.msec"))
        let badValue = try check("  consumer: {session.timeout.ms: s3cret}")
        #expect(badValue.0 == 2)
        #expect(badValue.1.contains("kafka.consumer.session.timeout.ms"))
        #expect(!badValue.1.contains("s3cret"))
        let guarantee = try check("  consumer: {enable.auto.commit: \"true\"}")
        #expect(guarantee.0 == 2)
        #expect(guarantee.1.contains("kafka.consumer.enable.auto.commit"))
        let exactlyOnce = try check("  exactly_once: true")  // accepted: the check goes on to the key file
        #expect(exactlyOnce.0 == 2)
        #expect(!exactlyOnce.1.contains("kafka.exactly_once"))
        #expect(exactlyOnce.1.contains("apps.chat.auth"))
        // Settings librdkafka refuses only together: found by both commands before any connection.
        for command in ["check", "run"] {
            let together = try check("  producer: {max.in.flight.requests.per.connection: \"100\"}", command: command)
            #expect(together.0 == 2)
            #expect(together.1.contains("kafka.producer: could not create the Kafka client: `max.in.flight` must be set <= 5"))
        }
        // A queue too small for one record of message.max.bytes would hold a large dead letter forever.
        let smallQueue = try check("  producer: {queue.buffering.max.kbytes: \"512\"}")
        #expect(smallQueue.0 == 2)
        #expect(smallQueue.1.contains("kafka.producer: Kafka producer property \"queue.buffering.max.kbytes\" (512) must hold one record"),
                "\(smallQueue.1)")
        #expect(try check("  producer: {queue.buffering.max.kbytes: \"512\", message.max.bytes: \"500000\"}").1.contains("apps.chat.auth"))
        // A largest record too small for a dead letter or a result would stop the bridge at the
        // first such record after every restart.
        let smallRecords = try check("  producer: {message.max.bytes: \"1000\"}")
        #expect(smallRecords.0 == 2)
        #expect(smallRecords.1.contains("kafka.producer: Kafka producer property \"message.max.bytes\" (1000) must be at least 16384"),
                "\(smallRecords.1)")
        // Valid properties pass librdkafka; the check goes on to the (missing) key file.
        let valid = try check("  producer: {linger.ms: 5, compression.type: lz4}")
        #expect(valid.0 == 2)
        #expect(valid.1.contains("apps.chat.auth"))
    }

    /// An unreadable `apns.ca_file` is named by that key at `run` as at `check`, not by the first
    /// app whose TLS context would have read it.
    @Test func runNamesAnUnreadableCAFileByItsKey() throws {
        let configFile = try TemporaryFile(contents: """
        kafka: {brokers: 127.0.0.1:9}
        apns: {ca_file: /nonexistent/ca.pem}
        apps:
          - {name: chat, bundle_id: com.example.chat, auth: {type: token, key_file: /nonexistent/AuthKey.p8, key_id: ABC123DEFG, team_id: TEAM123456}}
        """)
        for command in ["check", "run"] {
            let (status, _, errorOutput) = try BridgeBinary.run([command, "--config", configFile.path])
            #expect(status == 2)
            #expect(errorOutput.contains("apns.ca_file: "), "\(command): \(errorOutput)")
            #expect(errorOutput.contains("/nonexistent/ca.pem"))
        }
    }

    @Test func checkReportsAnUnreadableKeyFileWithoutSecrets() throws {
        let configFile = try TemporaryFile(contents: """
        kafka: {brokers: localhost:9092}
        apps:
          - {name: chat, bundle_id: com.example.chat, auth: {type: token, key_file: /nonexistent/AuthKey.p8, key_id: ABC123DEFG, team_id: TEAM123456}}
        """)
        let (status, _, errorOutput) = try BridgeBinary.run(["check", "--config", configFile.path])
        #expect(status == 2)
        #expect(errorOutput.contains("apps.chat.auth"))
        #expect(errorOutput.contains("/nonexistent/AuthKey.p8"))
    }

    /// A FIFO or a directory where a file belongs (the configuration, a key, a CA file) is
    /// refused at once, saying what it is: reading a FIFO would block `check` and `run` forever.
    @Test func checkRefusesFilesThatAreNotRegularFilesAtOnce() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let fifo = scratch.file("pipe")
        #expect(mkfifo(fifo, 0o600) == 0)

        let configAsFIFO = try BridgeBinary.run(["check", "--config", fifo])
        #expect(configAsFIFO.status == 2)
        #expect(configAsFIFO.error.contains("cannot read configuration file \(fifo): is not a regular file"), "\(configAsFIFO.error)")

        for (auth, apns, expected) in [
            ("{type: token, key_file: \(fifo), key_id: ABC123DEFG, team_id: TEAM123456}", "", "cannot read key file \(fifo): is not a regular file"),
            ("{type: token, key_file: \(scratch.path), key_id: ABC123DEFG, team_id: TEAM123456}", "", "cannot read key file \(scratch.path): is a directory"),
            ("{type: certificate, p12_file: \(fifo)}", "", "cannot read PKCS#12 file \(fifo): is not a regular file"),
        ] {
            let configFile = try TemporaryFile(contents: """
            kafka: {brokers: localhost:9092}
            \(apns)
            apps:
              - {name: chat, bundle_id: com.example.chat, auth: \(auth)}
            """)
            let (status, output, errorOutput) = try BridgeBinary.run(["check", "--config", configFile.path])
            #expect(status == 2)
            #expect(errorOutput.contains(expected), "\(errorOutput)")
            #expect(!output.contains("chmod 600"), "a mode warning about what is not a file: \(output)")
        }
    }

    @Test func sendDeliversOneNotificationThroughTheSimulator() throws {
        let environment = try LocalEnvironment()
        defer { environment.close() }
        let configFile = try TemporaryFile(contents: environment.configurationYAML())
        let token = String(repeating: "5a", count: 32)
        let (status, output, errorOutput) = try BridgeBinary.run([
            "send", "--config", configFile.path, "--token", token, "--payload", #"{"aps":{"alert":"hello"}}"#,
        ])
        #expect(status == 0, "\(errorOutput)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        #expect(json["outcome"] as? String == "delivered")
        #expect(json["token"] as? String == token)
        #expect(json["status"] as? Int == 200)

        // Numbers are sent as read: `+5` and `0999` are whole numbers to the options, not JSON numbers.
        let signed = try BridgeBinary.run([
            "send", "--config", configFile.path, "--token", token, "--payload", #"{"aps":{"content-available":1}}"#,
            "--push-type", "background", "--priority", "+5", "--expiration", "0999",
        ])
        #expect(signed.status != 2, "\(signed.error)")
        let signedResult = try #require(try JSONSerialization.jsonObject(with: Data(signed.output.utf8)) as? [String: Any])
        #expect(signedResult["outcome"] as? String == "expired", "\(signed.output)")

        // A payload that is not one JSON value on its own never reaches the request: text
        // that would add fields of its own, or an error placed in the payload's own terms.
        for (payload, expected) in [(#"{"aps":{}},"id":"INJECTED""#, "line 1, column 11"), ("", "line 1, column 1")] {
            let refused = try BridgeBinary.run(["send", "--config", configFile.path, "--token", token, "--payload", payload])
            #expect(refused.status == 2)
            #expect(refused.error.contains("--payload is not one JSON value: \(expected)"), "\(refused.error)")
            #expect(!refused.output.contains("INJECTED"))
        }
        // Bytes that are not UTF-8 are refused as given, never replaced on the way in.
        let shell = try BridgeBinary.runThroughShell(#""$0" send --config "$1" --token "$2" --payload "$(printf '{"aps":{"alert":"\377"}}')""#,
                                             [BridgeBinary.url.path, configFile.path, token])
        #expect(shell.status == 2, "\(shell.error)")
        #expect(shell.error.contains("argument 7 is not valid UTF-8"), "\(shell.error)")
    }

    /// When `--timeout` passes before APNs answers, `send` says so, exits 1, and reports the
    /// notification (as connection lost, from the shutdown) instead of waiting on.
    @Test func sendSaysWhenItsTimeoutPassedBeforeAnAnswer() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1.0))
        let configFile = try TemporaryFile(contents: environment.configurationYAML())
        let (status, output, errorOutput) = try BridgeBinary.run([
            "send", "--config", configFile.path, "--token", String(repeating: "5b", count: 32),
            "--payload", #"{"aps":{}}"#, "--timeout", "1",
        ])
        #expect(status == 1)
        #expect(errorOutput.contains("the timeout passed before every result"), "\(errorOutput)")
        #expect(output.contains(#""outcome":"failed""#), "\(output)")
    }

    @Test func unknownCommandAndOptionExitTwoWithHelp() throws {
        #expect(try BridgeBinary.run(["frobnicate"]).status == 2)
        #expect(try BridgeBinary.run(["run", "--confg", "x"]).status == 2)
        // An argument quoted in a usage error is printed with its control characters escaped.
        let hostile = try BridgeBinary.run(["run", "--con\u{1B}[31mfig", "x"])
        #expect(hostile.status == 2)
        #expect(hostile.error.contains("--con\\u{1b}[31mfig") && !hostile.error.contains("\u{1B}"), "\(hostile.error)")
        let (status, output, _) = try BridgeBinary.run(["--version"])
        #expect(status == 0)
        #expect(output.hasPrefix("apns-bridge "))
        // Every command explains itself and exits 0, doing nothing else.
        for command in ["run", "check", "send", "simulator", "demo", "bench"] {
            let help = try BridgeBinary.run([command, "--help"])
            #expect(help.status == 0, "\(command)")
            #expect((help.output + help.error).contains("Usage: apns-bridge \(command)"), "\(command)")
            let helpCommand = try BridgeBinary.run(["help", command])
            #expect(helpCommand.status == 0, "help \(command)")
            #expect(helpCommand.output == help.output, "help \(command)")
        }
        #expect(try BridgeBinary.run(["help", "frobnicate"]).status == 2)
        let simulator = try BridgeBinary.run(["simulator"])
        #expect(simulator.status == 2)
        #expect(simulator.error.contains("either --credentials DIR or --cert FILE --key FILE is required"), "\(simulator.error)")
    }
}

/// The built `apns-bridge` executable next to the test bundle.
enum BridgeBinary {
    /// The binary built with these tests: it sits beside the test bundle in the same build
    /// directory (so the AddressSanitizer run drives the sanitized binary from `.build-asan`).
    static var url: URL {
        let testBundle = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let beside = testBundle.deletingLastPathComponent().appendingPathComponent("apns-bridge")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        // Tests/EndToEndTests/<file> → package root → .build/debug/apns-bridge
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/apns-bridge")
    }

    /// Starts the binary; `environment` is added to the test's own, and its standard error (the
    /// log) goes to `logFile` when given.
    static func start(_ arguments: [String], environment: [String: String] = [:], logFile: String? = nil) throws -> Process {
        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        if let logFile {
            _ = FileManager.default.createFile(atPath: logFile, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: logFile)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        return process
    }

    static func wait(_ process: Process, seconds: Double) -> Int32? {
        guard waitFor(timeout: .milliseconds(Int64(seconds * 1000)), every: .milliseconds(20), { !process.isRunning }) else {
            return nil
        }
        process.waitUntilExit()   // returns at once; lets Foundation release the process (it keeps itself until then)
        return process.terminationStatus
    }

    /// Kills `process` with SIGKILL if it still runs `interval` from now (its pipes then reach
    /// their end, so a reader waiting on them returns).
    static func killAtDeadline(_ process: Process, after interval: DispatchTimeInterval) {
        let pid = process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + interval) { [process] in
            if process.isRunning { kill(pid, SIGKILL) }
        }
    }

    /// Terminates `process` if it still runs and reaps it (SIGKILL when it has not exited 30 s
    /// after SIGTERM, so a stuck process cannot hold the test run).
    static func stop(_ process: Process) {
        if process.isRunning {
            process.terminate()
            if wait(process, seconds: 30) == nil { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
    }

    /// The last lines of the log at `path`, for a failure message.
    static func tail(of path: String, lines: Int = 15) -> String {
        let contents = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return contents.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// Lines of the log at `path` that contain `text`.
    static func count(_ text: String, in path: String) -> Int {
        guard let contents = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
        return contents.split(separator: "\n").count { $0.contains(text) }
    }

    /// Runs `script` with `sh -c`, `arguments` as `$0`, `$1`, …: for arguments a `String` cannot
    /// carry (bytes that are not UTF-8), made by the shell.
    static func runThroughShell(_ script: String, _ arguments: [String]) throws -> (status: Int32, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script] + arguments
        let error = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = error
        try process.run()
        killAtDeadline(process, after: runDeadline)
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: errorData, as: UTF8.self))
    }

    /// How long `run` lets a command take before it is killed: a command that hangs fails its
    /// test (status SIGKILL) instead of holding the whole run.
    static let runDeadline: DispatchTimeInterval = .seconds(180)

    static func run(_ arguments: [String],
                    deadline: DispatchTimeInterval = runDeadline) throws -> (status: Int32, output: String, error: String) {
        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        killAtDeadline(process, after: deadline)
        // Both pipes are drained at once: a child that fills one while the other is read would block forever.
        let errorReader = PipeDrain(error.fileHandleForReading)
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = errorReader.wait()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outputData, as: UTF8.self), String(decoding: errorData, as: UTF8.self))
    }
}

/// Reads a pipe to its end on a thread of its own.
final class PipeDrain: @unchecked Sendable {
    private var data = Data()   // written by the reading thread before `done` is signalled
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    /// Everything the pipe carried, once its writer closed it.
    func wait() -> Data {
        done.wait()
        return data
    }
}

/// An `apns-bridge run` process on a configuration file of its own, its standard error kept in
/// a scratch directory's `bridge.log`; stopped (SIGTERM, then SIGKILL) and cleaned up with it.
final class BridgeRunProcess {
    let process: Process
    private let configFile: TemporaryFile
    private let log: ScratchDirectory

    init(yaml: String) throws {
        configFile = try TemporaryFile(contents: yaml)
        log = try ScratchDirectory()
        process = try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("bridge.log"))
    }

    /// The log's last lines, for a failure message.
    var logTail: String { BridgeBinary.tail(of: log.file("bridge.log")) }

    deinit {
        BridgeBinary.stop(process)
        log.remove()
    }
}

/// A file under /tmp, removed when the value is released.
final class TemporaryFile {
    let path: String

    init(contents: String) throws {
        path = NSTemporaryDirectory() + "apns-bridge-test-\(UUID().uuidString).yaml"
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
