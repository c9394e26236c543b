import Bridge
import Foundation

/// The figures of one `apns-bridge bench` run.
public struct BenchmarkReport: Sendable {
    /// What one `apns-bridge run` instance did in the peak run.
    public struct Instance: Sendable {
        /// Notifications it finished in the peak run (its `apns_bridge_notifications_total`).
        public var notifications = 0
        /// Its CPU seconds (all its threads) over the peak run.
        public var cpuSeconds = 0.0
        /// The same time by thread name, largest first.
        public var threadCPU: [(name: String, seconds: Double)] = []
        /// Its exit code after SIGTERM (0 after a clean stop), -1 before.
        public var exitCode: Int32 = -1
        /// Its peak resident memory (the kernel's `VmHWM` / `ru_maxrss`).
        public var maxResidentMegabytes = 0.0
        /// Its CPU seconds over its whole life (start, warm-up, both runs, stop), from `wait4`.
        public var lifetimeCPUSeconds = 0.0
    }

    /// What was run (partitions as actually used).
    public var settings: BenchmarkSettings
    /// The h2load reference, when it ran: the run of median rate among `h2loadRuns`.
    public var h2load: H2LoadResult?
    /// Every h2load run, in order.
    public var h2loadRuns: [H2LoadResult] = []
    /// Things the reader should know (h2load missing or not all 2xx …).
    public var warnings: [String] = []
    /// Seconds to produce the peak run's requests and get Kafka's acknowledgements.
    public var produceSeconds = 0.0
    /// Milliseconds from the instances' continuing, once the peak run's requests were all
    /// produced, to its first result (the result's Kafka timestamp): never negative, since the
    /// instances are stopped while the requests are produced. Nil when no result came.
    public var firstResultAfterProducedMilliseconds: Int64?
    /// Seconds of the warm-up: from the instances' start until they joined the group and answered.
    public var startupSeconds = 0.0
    /// Seconds from the first result of the peak run to the last, by the results' Kafka timestamps.
    public var windowSeconds = 0.0
    /// The same window as the observer received the records.
    public var observedWindowSeconds = 0.0
    /// Seconds to stop the instances (drain, flush, final commit).
    public var stopSeconds = 0.0
    /// Wall time of the whole run, h2load included.
    public var totalSeconds = 0.0
    /// The bridge instances, in start order.
    public var instances: [Instance] = []
    /// CPU seconds of the benchmark process itself over the peak run: simulator, mock cluster,
    /// producer and observer (not the bridge).
    public var benchmarkProcessCPUSeconds = 0.0
    /// Peak-run result records seen, and how many said `delivered`.
    public var results = 0
    public var delivered = 0
    /// Missing, duplicated, unreadable or undelivered results.
    public var mismatches: [String] = []
    /// `latency_ms` percentiles of the peak run's results (they include the backlog's wait).
    public var latencyP50: Double?
    public var latencyP99: Double?
    /// The paced run: its request rate, results, window, and the time the bridge added
    /// (result record's Kafka timestamp − request record's) in milliseconds.
    public var pacedRequestsPerSecond: Double?
    public var pacedResults = 0
    public var pacedWindowSeconds = 0.0
    public var addedLatencyP50: Double?
    public var addedLatencyP99: Double?
    public var addedLatencyMax: Double?
    /// The paced run's share of that up to the final APNs answer: the results' own `latency_ms`
    /// (request record's Kafka timestamp → answer); the rest is the result's way to Kafka.
    public var answerLatencyP50: Double?
    public var answerLatencyP99: Double?
    /// Request records produced (warm-up, peak and paced runs) and the group's committed offsets
    /// summed over the partitions.
    public var producedRecords = 0
    public var committedRecords: Int64 = 0

    /// Creates an empty report for `settings`.
    public init(settings: BenchmarkSettings) {
        self.settings = settings
    }

    /// Every instance stopped cleanly.
    public var instancesExitedCleanly: Bool {
        instances.count == settings.instances && instances.allSatisfy { $0.exitCode == 0 }
    }

    /// Every result delivered exactly once, every offset committed, clean stops.
    public var isComplete: Bool {
        mismatches.isEmpty && results == settings.notifications && delivered == settings.notifications
            && committedRecords == Int64(producedRecords) && instancesExitedCleanly
    }

    /// Peak-run results per second over the window.
    public var notificationsPerSecond: Double {
        Double(results) / max(windowSeconds, 0.001)
    }

    /// Peak-run requests per second over the window.
    public var requestsPerSecond: Double {
        notificationsPerSecond / Double(max(settings.tokensPerRequest, 1))
    }

    /// CPU seconds of every instance over the peak run.
    public var bridgeCPUSeconds: Double {
        instances.reduce(0) { $0 + $1.cpuSeconds }
    }

    /// The bridge's CPU microseconds per notification (its own processes only).
    public var bridgeCPUMicrosecondsPerNotification: Double {
        bridgeCPUSeconds * 1e6 / Double(max(results, 1))
    }

    /// The bridge's CPU per notification over h2load's CPU per request.
    public var cpuRatioToH2Load: Double? {
        h2load?.cpuMicrosecondsPerRequest.map { bridgeCPUMicrosecondsPerNotification / max($0, 0.001) }
    }

    /// The largest peak RSS of the instances.
    public var maxResidentMegabytes: Double {
        instances.map(\.maxResidentMegabytes).max() ?? 0
    }

    /// The bridge's rate as a share of h2load's.
    public var shareOfH2Load: Double? {
        h2load.map { notificationsPerSecond / max($0.requestsPerSecond, 0.001) }
    }

    /// An instance's notifications per second over the peak window.
    public func notificationsPerSecond(of instance: Instance) -> Double {
        Double(instance.notifications) / max(windowSeconds, 0.001)
    }

    /// `value` with `decimals` decimals (plain JSON number syntax).
    static func format(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "0" }
        return String(format: "%.\(decimals)f", value)
    }
}
