import Foundation
import Testing

/// `apns-bridge simulator` as its own process, answered to by `apns-bridge send`.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct SimulatorProcessTests {
    @Test func simulatorWithGeneratedCredentialsAnswersSend() throws {
        let directory = NSTemporaryDirectory() + "apns-bridge-sim-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gone = String(repeating: "cd", count: 32)
        let simulator = Process()
        simulator.executableURL = BridgeBinary.url
        simulator.arguments = ["simulator", "--listen", "127.0.0.1:0", "--credentials", directory,
                               "--unregistered", "\(gone):1700000000999"]
        let output = Pipe()
        simulator.standardOutput = output
        simulator.standardError = FileHandle.nullDevice
        try simulator.run()
        defer { if simulator.isRunning { simulator.terminate() } }

        let port = try #require(try Self.readListeningPort(from: output.fileHandleForReading))
        let configFile = try TemporaryFile(contents: """
        kafka: {brokers: 127.0.0.1:9}
        apns:
          production_url: https://127.0.0.1:\(port)
          ca_file: \(directory)/ca.pem
        apps:
          - name: chat
            bundle_id: com.example.chat
            auth: {type: token, key_file: \(directory)/AuthKey_ABC123DEFG.p8, key_id: ABC123DEFG, team_id: TEAM123456}
        """)

        let delivered = try BridgeBinary.run([
            "send", "--config", configFile.path, "--token", String(repeating: "12", count: 32),
            "--payload", #"{"aps":{"alert":"hi"}}"#,
        ])
        #expect(delivered.status == 0, "\(delivered.error)")
        #expect(delivered.output.contains(#""outcome":"delivered""#))

        let rejected = try BridgeBinary.run([
            "send", "--config", configFile.path, "--token", gone, "--payload", #"{"aps":{"alert":"hi"}}"#,
        ])
        #expect(rejected.status == 1)
        #expect(rejected.output.contains(#""reason":"Unregistered""#))
        #expect(rejected.output.contains(#""unregistered_at":1700000000999"#))

        kill(simulator.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(simulator, seconds: 10) == 0)
    }

    /// Reads the simulator's standard output until it names its port.
    static func readListeningPort(from handle: FileHandle) throws -> Int? {
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            text += String(decoding: chunk, as: UTF8.self)
            if let range = text.range(of: "listening on https://127.0.0.1:") {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if text[range.upperBound...].contains("\n") { return Int(digits) }
            }
        }
        return nil
    }
}
