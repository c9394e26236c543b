import Bridge
import BridgeLocal
import Foundation
import Testing
import TestSupport

/// The image's entry point and health check (deploy/docker/), run here against the real binary.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct DockerScriptsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test func theEntryPointWaitsForItsFilesThenRunsTheBridge() throws {
        let scratch = try ScratchDirectory(prefix: "apns-bridge-entrypoint")
        defer { scratch.remove() }
        let entrypoint = URL(fileURLWithPath: Self.root + "/deploy/docker/entrypoint.sh")
        let environment = ["APNS_BRIDGE_BINARY": BridgeBinary.url.path, "APNS_BRIDGE_WAIT_FOR": scratch.file("ca.pem"),
                           "APNS_BRIDGE_WAIT_SECONDS": "1"]

        let missing = try CapturedProcess(entrypoint, ["--version"], environment: environment)
        #expect(BridgeBinary.wait(missing.process, seconds: 20) == 1)
        #expect(missing.errorOutput.contains("\(scratch.file("ca.pem")) did not appear within 1s"))

        var waiting = environment
        waiting["APNS_BRIDGE_WAIT_SECONDS"] = "30"
        let started = try CapturedProcess(entrypoint, ["--version"], environment: waiting)
        #expect(waitFor(timeout: .seconds(20)) { started.errorOutput.contains("waiting for") })
        #expect(started.process.isRunning)
        try "ca".write(toFile: scratch.file("ca.pem"), atomically: true, encoding: .utf8)
        #expect(BridgeBinary.wait(started.process, seconds: 20) == 0)
        #expect(started.output.hasPrefix("apns-bridge "))
    }

    @Test func theHealthCheckPassesWhileTheBridgeRunsAndFailsOnceItStopped() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let port = try LoopbackPort.unused()
        let config = try TemporaryFile(contents: environment.configurationYAML(groupID: "healthcheck")
            .replacingOccurrences(of: "listen: 127.0.0.1:0", with: "listen: 127.0.0.1:\(port)"))
        let bridge = try CapturedProcess(BridgeBinary.url, ["run", "--config", config.path])
        let healthcheck = URL(fileURLWithPath: Self.root + "/deploy/docker/healthcheck.sh")
        func healthy(_ environment: [String: String] = ["APNS_BRIDGE_HTTP_PORT": "\(port)"]) -> Bool {
            guard let check = try? CapturedProcess(healthcheck, [], environment: environment) else { return false }
            return BridgeBinary.wait(check.process, seconds: 10) == 0
        }
        #expect(waitFor(timeout: .seconds(30), every: .milliseconds(200)) { healthy() }, "\(bridge.errorOutput)")
        // The listener the shipped configuration takes from APNS_BRIDGE_HTTP_LISTEN, a wildcard
        // host reached on loopback; a wrong port there fails whatever APNS_BRIDGE_HTTP_PORT says.
        #expect(healthy(["APNS_BRIDGE_HTTP_LISTEN": "127.0.0.1:\(port)"]))
        #expect(healthy(["APNS_BRIDGE_HTTP_LISTEN": "0.0.0.0:\(port)", "APNS_BRIDGE_HTTP_PORT": "1"]))
        #expect(!healthy(["APNS_BRIDGE_HTTP_LISTEN": "0.0.0.0:1", "APNS_BRIDGE_HTTP_PORT": "\(port)"]))
        #expect(bridge.stop() == 0)
        #expect(!healthy())
    }
}
