import Foundation
import Synchronization
@testable import HTTP2
import Testing

/// `apns-bridge simulator` as its own process, answered to by `apns-bridge send`.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct SimulatorProcessTests {
    @Test func simulatorWithGeneratedCredentialsAnswersSend() throws {
        let directory = NSTemporaryDirectory() + "apns-bridge-sim-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gone = String(repeating: "cd", count: 32)
        let otherApps = String(repeating: "ef", count: 32)
        let (simulator, port) = try Self.startSimulator(
            directory: directory, ["--unregistered", "\(gone):1700000000999", "--token-app", "\(otherApps):com.example.other"])
        defer { BridgeBinary.stop(simulator) }
        let configFile = try Self.sendConfiguration(port: port, directory: directory)

        let delivered = try Self.send(configFile, token: String(repeating: "12", count: 32))
        #expect(delivered.status == 0, "\(delivered.error)")
        #expect(delivered.output.contains(#""outcome":"delivered""#))
        #expect(delivered.output.contains(#""apns_unique_id":null"#))  // production's answers carry none

        let rejected = try Self.send(configFile, token: gone)
        #expect(rejected.status == 1)
        #expect(rejected.output.contains(#""reason":"Unregistered""#))
        #expect(rejected.output.contains(#""unregistered_at":1700000000999"#))

        let notForTopic = try Self.send(configFile, token: otherApps)
        #expect(notForTopic.status == 1)
        #expect(notForTopic.output.contains(#""reason":"DeviceTokenNotForTopic""#))

        kill(simulator.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(simulator, seconds: 10) == 0)
    }

    /// `--sandbox`: answered as the development environment, whose 200s carry an
    /// `apns-unique-id`, which reaches the result.
    @Test func theSandboxFlagAddsAUniqueIDToEveryDeliveredAnswer() throws {
        let output = try Self.deliverOne(["--sandbox"])
        let uniqueID = output.firstRange(of: #/"apns_unique_id":"([0-9a-fA-F-]{36})"/#)
        #expect(uniqueID != nil, "\(output)")
    }

    @Test func faultFlagsAreAcceptedAndTheSimulatorStillDelivers() throws {
        // Every fault flag, each set so that one notification still goes through, and a
        // connection limit.
        _ = try Self.deliverOne([
            "--max-connections", "2",
            "--latency", "20ms", "--goaway-every", "1000", "--drop-every", "1000", "--fail", "429:0,503:0",
            "--stall", "0", "--half-open-after", "1000", "--jwt-max-age", "30m", "--initial-streams", "1",
            "--token-update-interval", "20m",
        ])
    }

    /// Starts the simulator with `extra` options, sends one notification through `apns-bridge
    /// send`, expects it delivered and the simulator to stop with exit 0 on SIGTERM, and returns
    /// what `send` printed.
    static func deliverOne(_ extra: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let directory = NSTemporaryDirectory() + "apns-bridge-sim-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (simulator, port) = try startSimulator(directory: directory, extra)
        defer { BridgeBinary.stop(simulator) }
        let configFile = try sendConfiguration(port: port, directory: directory)
        let delivered = try send(configFile, token: String(repeating: "12", count: 32))
        #expect(delivered.status == 0, "\(delivered.error)", sourceLocation: sourceLocation)
        #expect(delivered.output.contains(#""outcome":"delivered""#), sourceLocation: sourceLocation)
        kill(simulator.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(simulator, seconds: 10) == 0, sourceLocation: sourceLocation)
        return delivered.output
    }

    /// A stop signal sent the moment the simulator names its port is neither lost nor the end
    /// of the process by the signal's default action: it closes and exits 0.
    @Test func aStopSignalRightAfterTheStartStopsTheSimulatorCleanly() throws {
        let directory = NSTemporaryDirectory() + "apns-bridge-sim-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for signalNumber in [SIGTERM, SIGINT, SIGTERM] {
            let (simulator, _) = try Self.startSimulator(directory: directory, [])
            defer { BridgeBinary.stop(simulator) }
            kill(simulator.processIdentifier, signalNumber)
            let status = BridgeBinary.wait(simulator, seconds: 10)
            #expect(status == 0 && simulator.terminationReason == .exit, "signal \(signalNumber): \(String(describing: status))")
        }
    }

    @Test func unusableFaultFlagsAreUsageErrors() throws {
        let directory = NSTemporaryDirectory() + "apns-bridge-sim-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (flags, message) in [(["--fail", "404:0.1"], "404"), (["--fail", "429"], "--fail"),
                                 (["--latency", "20"], "--latency"), (["--stall", "2"], "stall"),
                                 (["--goaway-every", "0"], "goaway-every"), (["--max-connections", "0"], "--max-connections"),
                                 (["--hostile", "teapot"], "--hostile"), (["--hostile", "ping-flood:0"], "count"),
                                 (["--token-app", "abcd"], "--token-app"), (["--token-app", "abcd:"], "--token-app")] {
            let result = try BridgeBinary.run(["simulator", "--listen", "127.0.0.1:0", "--credentials", directory] + flags)
            #expect(result.status == 2, "\(flags)")
            #expect(result.error.contains(message), "\(flags): \(result.error)")
        }
        // Files the simulator cannot use are usage errors too: a certificate that is not there, a
        // provider key file that is no PEM public key.
        let notPEM = directory + "-not-a-key.pem"
        try "not a key\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: notPEM) }
        for flags in [["--cert", directory + "-missing.pem", "--key", directory + "-missing.key"],
                      ["--credentials", directory, "--auth-key", "ABC123DEFG:TEAM123456:" + notPEM]] {
            let result = try BridgeBinary.run(["simulator", "--listen", "127.0.0.1:0"] + flags)
            #expect(result.status == 2, "\(flags): \(result.error)")
        }
    }

    /// `--listen [::1]:0`: an IPv6 address in brackets, as in a URL.
    @Test func theSimulatorListensOnABracketedIPv6Address() throws {
        let directory = NSTemporaryDirectory() + "apns-bridge-sim-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (simulator, port) = try Self.startSimulator(directory: directory, [], listen: "[::1]")
        defer { BridgeBinary.stop(simulator) }
        let socket = try SocketAddress.resolve(host: "::1", port: port)[0].startConnect()
        defer { close(socket) }
        var pollDescriptor = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
        #expect(poll(&pollDescriptor, 1, 5_000) == 1)
        #expect(SocketAddress.pendingError(of: socket) == 0, "nothing accepts on [::1]:\(port)")
    }

    /// Starts `apns-bridge simulator` on `listen` (port 0) with generated credentials in
    /// `directory` and `extra` options; returns the process and the port it listens on.
    static func startSimulator(directory: String, _ extra: [String], listen: String = "127.0.0.1") throws -> (Process, Int) {
        let simulator = Process()
        simulator.executableURL = BridgeBinary.url
        simulator.arguments = ["simulator", "--listen", "\(listen):0", "--credentials", directory] + extra
        let output = Pipe()
        simulator.standardOutput = output
        simulator.standardError = FileHandle.nullDevice
        try simulator.run()
        // A simulator that never names its port is killed, so the read below reaches its end.
        let named = Atomic<Bool>(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(30)) { [simulator] in
            if !named.load(ordering: .relaxed), simulator.isRunning { simulator.terminate() }
        }
        let port = try readListeningPort(from: output.fileHandleForReading, host: listen)
        named.store(true, ordering: .relaxed)
        guard let port else {
            BridgeBinary.stop(simulator)
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "the simulator named no port"])
        }
        return (simulator, port)
    }

    /// `apns-bridge send` of one alert to `token` with `configFile`.
    static func send(_ configFile: TemporaryFile, token: String) throws -> (status: Int32, output: String, error: String) {
        try BridgeBinary.run(["send", "--config", configFile.path, "--token", token, "--payload", #"{"aps":{"alert":"hi"}}"#])
    }

    /// A configuration for `apns-bridge send` against the simulator on `port`.
    static func sendConfiguration(port: Int, directory: String) throws -> TemporaryFile {
        try TemporaryFile(contents: """
        kafka: {brokers: 127.0.0.1:9}
        apns:
          production_url: https://127.0.0.1:\(port)
          ca_file: \(directory)/ca.pem
        apps:
          - name: chat
            bundle_id: com.example.chat
            auth: {type: token, key_file: \(directory)/AuthKey_ABC123DEFG.p8, key_id: ABC123DEFG, team_id: TEAM123456}
        """)
    }

    /// Reads the simulator's standard output until it names its port.
    static func readListeningPort(from handle: FileHandle, host: String = "127.0.0.1") throws -> Int? {
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            text += String(decoding: chunk, as: UTF8.self)
            if let range = text.range(of: "listening on https://\(host):") {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if text[range.upperBound...].contains("\n") { return Int(digits) }
            }
        }
        return nil
    }
}
