#if canImport(Glibc)
import Glibc
#endif
import Bridge
import Foundation

/// One `apns-bridge run` instance as a child process, the way users run the bridge: its own
/// configuration file, its status endpoint on a port of its own, its CPU time and memory read
/// from the kernel apart from the benchmark's (simulator, mock cluster, observer, producer).
public final class BridgeProcess: @unchecked Sendable {
    /// The child.
    public let child: ChildProcess
    /// The port of its `http.listen` (`/metrics`).
    public let statusPort: Int
    private let directory: String

    /// Writes `yaml` (whose `http.listen` this replaces) and starts `executable run --config …`
    /// with `APNS_BRIDGE_INSTANCE_ID` set to `instanceID` (instances of one group need distinct
    /// ids: exactly-once mode derives each one's transactional id from it). The bridge's log
    /// (warnings and errors) goes to `bridge.log` in a temporary folder, kept only while the
    /// process object lives. A non-empty `wrapper` (a command and its arguments, the command
    /// found on `PATH` when it has no `/`) is started instead, with `executable run --config …`
    /// appended: e.g. `valgrind --tool=callgrind` to count the instance's instructions. The
    /// instance's CPU, memory and signals are then those of the wrapper's process.
    public init(executable: String, yaml: String, instanceID: String, wrapper: [String] = []) throws {
        directory = try LocalFiles.makeTemporaryDirectory(prefix: "apns-bridge-instance")
        do {
            statusPort = try LoopbackPort.unused()
            let configFile = directory + "/bridge.yaml"
            let configured = yaml.replacingOccurrences(of: "listen: 127.0.0.1:0", with: "listen: 127.0.0.1:\(statusPort)")
            try configured.write(toFile: configFile, atomically: true, encoding: .utf8)
            let command = wrapper + [executable, "run", "--config", configFile]
            child = try ChildProcess(executable: command[0], arguments: Array(command.dropFirst()),
                                     environment: ["APNS_BRIDGE_INSTANCE_ID": instanceID],
                                     errorFile: directory + "/bridge.log")
        } catch {
            LocalFiles.removeDirectory(directory)
            throw error
        }
    }

    deinit {
        LocalFiles.removeDirectory(directory)
    }

    /// CPU time and threads of the instance now.
    public func sample() -> ProcessCPUTimes {
        ProcessCPUTimes.sample(pid: child.pid)
    }

    /// The notifications it finished so far (`apns_bridge_notifications_total`, all outcomes),
    /// nil when `/metrics` does not answer.
    public func finishedNotifications() -> Int? {
        metric("apns_bridge_notifications_total").map { Int($0) }
    }

    /// The sum of every sample of the metric `name` in its `/metrics` now (0 when it has none),
    /// nil when `/metrics` does not answer.
    public func metric(_ name: String) -> Double? {
        guard let text = Self.get(port: statusPort, path: "/metrics") else { return nil }
        var total = 0.0
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { total += value }
        }
        return total
    }

    /// SIGTERM (drain, flush, commit), then waits at most `timeoutSeconds` for the exit.
    public func stop(timeoutSeconds: Double = 60) -> ChildProcess.Exit {
        child.send(SIGTERM)
        return child.wait(timeoutSeconds: timeoutSeconds)
    }

    /// Everything the instance logged so far.
    public var log: String {
        (try? String(contentsOfFile: directory + "/bridge.log", encoding: .utf8)) ?? ""
    }

    /// The last lines the instance logged (for a failure report).
    public var logTail: String {
        log.split(separator: "\n").suffix(5).joined(separator: "\n")
    }

    /// The body of `GET path` on 127.0.0.1:`port` (HTTP/1.0, blocking, 2 s timeout), nil on failure.
    static func get(port: Int, path: String) -> String? {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        defer { close(socket) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return nil }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(socket, $0.baseAddress, $0.count, 0) }) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            response.append(contentsOf: buffer[..<count])
        }
        let text = String(decoding: response, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.") && text.contains(" 200 "), let body = text.range(of: "\r\n\r\n") else { return nil }
        return String(text[body.upperBound...])
    }
}
