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
        let port = HTTPTestClient.freePort()
        let config = try TemporaryFile(contents: environment.configurationYAML(groupID: "healthcheck")
            .replacingOccurrences(of: "listen: 127.0.0.1:0", with: "listen: 127.0.0.1:\(port)"))
        let bridge = try CapturedProcess(BridgeBinary.url, ["run", "--config", config.path])
        let healthcheck = URL(fileURLWithPath: Self.root + "/deploy/docker/healthcheck.sh")
        func healthy() -> Bool {
            guard let check = try? CapturedProcess(healthcheck, [], environment: ["APNS_BRIDGE_HTTP_PORT": "\(port)"]) else { return false }
            return BridgeBinary.wait(check.process, seconds: 10) == 0
        }
        #expect(waitFor(timeout: .seconds(30), every: .milliseconds(200)) { healthy() }, "\(bridge.errorOutput)")
        #expect(bridge.stop() == 0)
        #expect(!healthy())
    }
}
