#if canImport(Glibc)
import Glibc
#endif
import Bridge
import APNsSimulator
import Foundation
import Observability

/// `apns-bridge bench --memory`: the resident memory of a real `apns-bridge run` process while
/// a large backlog waits behind an unreachable APNs, and again while it catches up.
///
/// The measuring process holds the mock Kafka cluster (and so the whole backlog) and, in the
/// second phase, the simulator; the bridge runs as a child process, whose `VmRSS` is sampled
/// from `/proc/<pid>/status` every 100 ms (and `VmHWM`, the kernel's own peak, read at the end).
public enum MemoryBenchmark {
    /// What to run.
    public struct Settings: Sendable {
        /// Requests of `tokensPerLargeRequest` tokens each.
        public var largeRequests = 200
        public var tokensPerLargeRequest = 5_000
        /// Single-token requests after them.
        public var singleTokenRequests = 50_000
        /// `limits.max_in_flight` of the bridge.
        public var maxInFlight = 20_000
        /// How long APNs stays unreachable.
        public var outageSeconds = 15.0
        /// The longest the catch-up may take.
        public var catchUpTimeoutSeconds = 600.0
        /// The bridge executable (`apns-bridge`).
        public var executable: String
        /// The RSS the run must stay within.
        public var limitMegabytes = 256.0

        /// Settings with the defaults of the memory target (docs/BENCHMARKS.md).
        public init(executable: String) {
            self.executable = executable
        }

        /// Notifications in the backlog.
        public var notifications: Int { largeRequests * tokensPerLargeRequest + singleTokenRequests }
        /// Request records in the backlog.
        public var records: Int { largeRequests + singleTokenRequests }
    }

    /// The figures of one run.
    public struct Report: Sendable {
        public var settings: Settings
        public var partitions = 0
        /// Highest sampled RSS while APNs was unreachable.
        public var outagePeakMegabytes = 0.0
        /// Highest sampled RSS while catching up.
        public var catchUpPeakMegabytes = 0.0
        /// The kernel's peak RSS of the bridge process (`VmHWM`) at the end.
        public var highWaterMegabytes = 0.0
        /// Request records committed by the end of the outage, and at the end.
        public var committedDuringOutage: Int64 = 0
        public var committedAtEnd: Int64 = 0
        public var catchUpSeconds = 0.0
        public var bridgeExitCode: Int32?

        /// Everything delivered and committed, the bridge stopped cleanly, within the RSS limit.
        public var isWithinTarget: Bool {
            committedAtEnd == Int64(settings.records) && bridgeExitCode == 0
                && highWaterMegabytes <= settings.limitMegabytes
        }

        /// Lines for the terminal.
        public var summary: [String] {
            [
                "backlog: \(settings.largeRequests) requests × \(settings.tokensPerLargeRequest) tokens + \(settings.singleTokenRequests) single-token requests = \(settings.notifications) notifications, \(partitions) partitions, max_in_flight \(settings.maxInFlight)",
                String(format: "APNs unreachable for %.0f s: peak RSS %.1f MB, %lld records committed", settings.outageSeconds, outagePeakMegabytes, committedDuringOutage),
                String(format: "catching up: peak RSS %.1f MB, %.1f s, %lld of %d records committed", catchUpPeakMegabytes, catchUpSeconds, committedAtEnd, settings.records),
                String(format: "bridge VmHWM %.1f MB (limit %.0f MB), exit code %@: %@", highWaterMegabytes, settings.limitMegabytes,
                       bridgeExitCode.map { "\($0)" } ?? "none", isWithinTarget ? "OK" : "FAILED"),
            ]
        }
    }

    /// Runs both phases; `progress` gets a line per phase.
    public static func run(settings: Settings, progress: @escaping @Sendable (String) -> Void = { _ in }) throws -> Report {
        var report = Report(settings: settings)
        let large = BenchmarkWorkload(requests: settings.largeRequests, tokensPerRequest: settings.tokensPerLargeRequest, seed: 11)
        let single = BenchmarkWorkload(requests: settings.singleTokenRequests, tokensPerRequest: 1, seed: 13)
        let records = large.records + single.records.map { record in
            // Ids distinct from the large requests'.
            DemoWorkload.Record(key: Array("single-".utf8) + record.key,
                                value: Array(String(decoding: record.value, as: UTF8.self).replacingOccurrences(of: "\"bench-", with: "\"single-bench-").utf8))
        }
        report.partitions = max(
            MockPartitionBudget.partitionsNeeded(records: large.records.count, bytesPerRecord: large.largestRequestBytes) * 2,
            MockPartitionBudget.partitionsNeeded(records: records.count, bytesPerRecord: single.largestRequestBytes + 16),
            MockPartitionBudget.partitionsNeeded(records: settings.notifications, bytesPerRecord: large.estimatedResultBytes))
        progress("starting the mock Kafka cluster (\(report.partitions) partitions); APNs is unreachable")
        let environment = try LocalEnvironment(partitions: Int32(report.partitions))
        defer { environment.close() }
        let port = environment.simulator.port
        // Written while the simulator still holds the port the bridge is to use.
        let yaml = environment.configurationYAML(
            groupID: "apns-bridge-memory",
            extra: "limits: {max_in_flight: \(settings.maxInFlight), max_tokens_per_request: \(max(10_000, settings.tokensPerLargeRequest))}\nlog: {level: warning, format: text}")
        environment.simulator.close()
        progress("producing \(records.count) requests (\(settings.notifications) notifications)")
        try environment.produceRequests(records)

        let directory = try LocalFiles.makeTemporaryDirectory(prefix: "apns-bridge-memory")
        defer { LocalFiles.removeDirectory(directory) }
        let configFile = directory + "/bridge.yaml"
        try yaml.write(toFile: configFile, atomically: true, encoding: .utf8)
        let bridge = Process()
        bridge.executableURL = URL(fileURLWithPath: settings.executable)
        bridge.arguments = ["run", "--config", configFile]
        bridge.standardOutput = FileHandle.nullDevice
        try bridge.run()
        defer { if bridge.isRunning { bridge.terminate() } }
        let pid = bridge.processIdentifier

        progress(String(format: "bridge started (pid %d); sampling its RSS for %.0f s", pid, settings.outageSeconds))
        let outageEnd = Timestamp.monotonicNanoseconds() + UInt64(settings.outageSeconds * 1e9)
        while Timestamp.monotonicNanoseconds() < outageEnd, bridge.isRunning {
            report.outagePeakMegabytes = max(report.outagePeakMegabytes, residentMegabytes(pid: pid, field: "VmRSS"))
            usleep(100_000)
        }
        report.committedDuringOutage = (try? environment.committedRequestCount(groupID: "apns-bridge-memory")) ?? -1

        progress("APNs is back: catching up")
        var simulatorConfiguration = environment.credentials.simulatorConfiguration(port: port)
        simulatorConfiguration.maxConcurrentStreams = 1000
        let simulator = try APNsSimulator(configuration: simulatorConfiguration)
        try simulator.start()
        defer { simulator.close() }
        let catchUpStart = Timestamp.monotonicNanoseconds()
        let catchUpEnd = catchUpStart + UInt64(settings.catchUpTimeoutSeconds * 1e9)
        var lastCheck: UInt64 = 0
        while Timestamp.monotonicNanoseconds() < catchUpEnd, bridge.isRunning {
            report.catchUpPeakMegabytes = max(report.catchUpPeakMegabytes, residentMegabytes(pid: pid, field: "VmRSS"))
            let now = Timestamp.monotonicNanoseconds()
            if now - lastCheck > 1_000_000_000 {
                lastCheck = now
                report.committedAtEnd = (try? environment.committedRequestCount(groupID: "apns-bridge-memory")) ?? 0
                if report.committedAtEnd >= Int64(settings.records) { break }
            }
            usleep(100_000)
        }
        report.catchUpSeconds = Double(Timestamp.monotonicNanoseconds() - catchUpStart) / 1e9
        report.highWaterMegabytes = residentMegabytes(pid: pid, field: "VmHWM")
        kill(pid, SIGTERM)
        bridge.waitUntilExit()
        report.bridgeExitCode = bridge.terminationStatus
        report.committedAtEnd = (try? environment.committedRequestCount(groupID: "apns-bridge-memory")) ?? report.committedAtEnd
        return report
    }

    /// `field` (`VmRSS`, `VmHWM`) of `/proc/<pid>/status` in MB; 0 when unreadable.
    static func residentMegabytes(pid: Int32, field: String) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            let kilobytes = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) } ?? 0
            return kilobytes / 1024
        }
        return 0
    }
}
