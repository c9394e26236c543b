import Bridge
import APNs
import APNsSimulator
import Foundation

/// What one h2load run reported.
public struct H2LoadResult: Sendable, Equatable {
    /// Wall time of the run in seconds (`finished in …`).
    public var seconds: Double
    /// Requests per second (`…, N req/s`).
    public var requestsPerSecond: Double
    /// Requests h2load was asked to send, and how they ended.
    public var total: Int
    public var succeeded: Int
    public var failed: Int
    public var errored: Int
    /// Answers by status class.
    public var status2xx: Int
    public var status3xx: Int
    public var status4xx: Int
    public var status5xx: Int

    /// h2load's own CPU time (user + system, from `wait4`) for the whole run, when measured.
    public var cpuSeconds: Double?

    /// h2load's CPU microseconds per request.
    public var cpuMicrosecondsPerRequest: Double? {
        cpuSeconds.map { $0 * 1e6 / Double(max(total, 1)) }
    }

    /// Whether nearly every request (99.9 %) was answered 2xx.
    public var isNearlyAll2xx: Bool {
        total > 0 && Double(status2xx) >= Double(total) * 0.999
    }
}

/// The reference ceiling: `h2load` (nghttp2-client) sending the benchmark's notification straight
/// to the simulator over the same number of TLS connections, 100 streams each.
public enum H2LoadReference {
    /// h2load could not be run or its output not read.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public var description: String
    }

    /// Where Debian's nghttp2-client installs h2load.
    public static let defaultExecutable = "/usr/bin/h2load"

    /// Runs h2load against `environment`'s simulator: `notifications` POSTs of
    /// `BenchmarkWorkload.payload` to one valid device token, over `connections` connections with
    /// up to 100 concurrent streams each. The provider token (a JWT signed with the environment's
    /// test key) is passed to h2load as an argument and never printed.
    /// - Throws: `Failure` when h2load is missing, fails, or prints no summary within `timeoutSeconds`.
    public static func run(environment: LocalEnvironment, notifications: Int, connections: Int,
                           executable: String = defaultExecutable, timeoutSeconds: Double = 300) throws -> H2LoadResult {
        guard access(executable, X_OK) == 0 else {
            throw Failure(description: "\(executable) not found (Debian package nghttp2-client)")
        }
        let credentials = environment.credentials
        let signer = JWTSigner(key: try APNsSigningKey(pem: credentials.authKey.privateKeyPKCS8PEM),
                               keyID: credentials.keyID, teamID: credentials.teamID)
        let jwt = try signer.sign(issuedAt: Int64(time(nil)))

        let directory = try LocalFiles.makeTemporaryDirectory(prefix: "apns-bridge-h2load")
        defer { LocalFiles.removeDirectory(directory) }
        let payloadFile = directory + "/payload.json"
        try Data(BenchmarkWorkload.payload.utf8).write(to: URL(fileURLWithPath: payloadFile))

        let outputFile = directory + "/h2load.out"
        let process = try ChildProcess(executable: executable, arguments: [
            "-n", "\(notifications)", "-c", "\(min(connections, notifications))", "-m", "100",
            "-H", "authorization: bearer \(jwt)",
            "-H", "apns-topic: \(BenchmarkWorkload.apnsTopic)",
            "-H", "apns-push-type: alert",
            "-d", payloadFile,
            "https://127.0.0.1:\(environment.simulator.port)/3/device/\(BenchmarkWorkload.referenceToken)",
        ], outputFile: outputFile)
        let exit = process.wait(timeoutSeconds: timeoutSeconds)
        let text = (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? ""
        guard exit.status == 0, var result = parse(text) else {
            throw Failure(description: "h2load exited with status \(exit.status) without a usable summary")
        }
        result.cpuSeconds = exit.cpuSeconds
        return result
    }

    /// Reads h2load's summary: `finished in 1.23s, 81234.56 req/s, …`, `requests: N total, …
    /// succeeded, … failed, … errored, …` and `status codes: N 2xx, N 3xx, N 4xx, N 5xx`.
    /// - Returns: nil when one of those lines is missing or unreadable.
    public static func parse(_ output: String) -> H2LoadResult? {
        var seconds: Double?
        var rate: Double?
        var requests: [String: Int] = [:]
        var statuses: [String: Int] = [:]
        for rawLine in output.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("finished in ") {
                let parts = line.dropFirst("finished in ".count).split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                guard parts.count >= 2 else { return nil }
                seconds = duration(parts[0])
                if parts[1].hasSuffix(" req/s") { rate = Double(parts[1].dropLast(" req/s".count)) }
            } else if line.hasPrefix("requests: ") {
                requests = counts(line.dropFirst("requests: ".count))
            } else if line.hasPrefix("status codes: ") {
                statuses = counts(line.dropFirst("status codes: ".count))
            }
        }
        guard let seconds, let rate, let total = requests["total"], let succeeded = requests["succeeded"],
              let failed = requests["failed"], let errored = requests["errored"], let status2xx = statuses["2xx"],
              let status3xx = statuses["3xx"], let status4xx = statuses["4xx"], let status5xx = statuses["5xx"] else {
            return nil
        }
        return H2LoadResult(seconds: seconds, requestsPerSecond: rate, total: total, succeeded: succeeded,
                            failed: failed, errored: errored, status2xx: status2xx, status3xx: status3xx,
                            status4xx: status4xx, status5xx: status5xx)
    }

    /// `"N name, M other"` → `[name: N, other: M]`.
    private static func counts(_ text: Substring) -> [String: Int] {
        var result: [String: Int] = [:]
        for item in text.split(separator: ",") {
            let words = item.split(separator: " ")
            if words.count == 2, let number = Int(words[0]) { result[String(words[1])] = number }
        }
        return result
    }

    /// `1.23s`, `823.45ms` or `950us` in seconds.
    private static func duration(_ text: String) -> Double? {
        for (suffix, scale) in [("ms", 1e-3), ("us", 1e-6), ("s", 1.0)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * scale }
        }
        return nil
    }
}
