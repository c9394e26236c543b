import BridgeLocal
import Foundation
import TestSupport

/// Prometheus' own tools (Debian package `prometheus`, installed by scripts/setup): `promtool`
/// to lint exposition and rules, and a real `prometheus` server for scrape tests.
enum PrometheusTools {
    /// The package root (Tests/EndToEndTests/<file> → root).
    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    static func executable(_ name: String) -> String? {
        for directory in ["/usr/bin", "/usr/local/bin", "/bin"] where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return "\(directory)/\(name)"
        }
        return nil
    }

    /// Runs `promtool arguments…` (with `input` on stdin), returning its status and combined output.
    static func promtool(_ arguments: [String], input: String? = nil, directory: String? = nil) throws -> (status: Int32, output: String) {
        guard let path = executable("promtool") else { throw ToolMissing(name: "promtool") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        if let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
        }
        try stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    struct ToolMissing: Error, CustomStringConvertible {
        var name: String
        var description: String { "\(name) is not installed (scripts/setup installs the Debian package prometheus)" }
    }
}

/// A real Prometheus server on 127.0.0.1 scraping one target every 200 ms, with its storage in
/// a scratch directory. `stop()` terminates it and removes the directory.
final class PrometheusServer {
    let port: Int
    private let process: Process
    private let directory: ScratchDirectory

    init(scraping target: String) throws {
        guard let path = PrometheusTools.executable("prometheus") else { throw PrometheusTools.ToolMissing(name: "prometheus") }
        directory = try ScratchDirectory(prefix: "prometheus")
        let configuration = """
        global:
          scrape_interval: 200ms
          scrape_timeout: 200ms
          evaluation_interval: 1s
        rule_files:
          - \(PrometheusTools.packageRoot)/deploy/prometheus/alerts.yml
        scrape_configs:
          - job_name: apns-bridge
            static_configs:
              - targets: ["\(target)"]
        """
        try configuration.write(toFile: directory.file("prometheus.yml"), atomically: true, encoding: .utf8)
        port = try LoopbackPort.unused()
        process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [
            "--config.file=\(directory.file("prometheus.yml"))",
            "--storage.tsdb.path=\(directory.file("data"))",
            "--web.listen-address=127.0.0.1:\(port)",
            "--log.level=warn",
        ]
        process.currentDirectoryURL = URL(fileURLWithPath: directory.path)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
    }

    var isRunning: Bool { process.isRunning }

    /// The result of an instant query as (labels, value) pairs; nil while Prometheus is not
    /// answering or the query failed.
    func query(_ expression: String) -> [(labels: [String: String], value: Double)]? {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        guard let encoded = expression.addingPercentEncoding(withAllowedCharacters: allowed),
              let response = HTTPTestClient.get(port: port, "/api/v1/query?query=\(encoded)"), response.status == 200,
              let json = try? JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any],
              json["status"] as? String == "success", let data = json["data"] as? [String: Any],
              let result = data["result"] as? [[String: Any]]
        else { return nil }
        return result.compactMap { entry in
            guard let labels = entry["metric"] as? [String: String], let value = entry["value"] as? [Any], value.count == 2,
                  let text = value[1] as? String, let number = Double(text) else { return nil }
            return (labels, number)
        }
    }

    /// Terminates the server and removes its storage.
    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        directory.remove()
    }
}
