import Bridge
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
        let port = try FreePort.pick()
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

/// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
enum FreePort {
    static func pick() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
