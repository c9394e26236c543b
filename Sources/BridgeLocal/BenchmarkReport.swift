import Bridge
import Foundation

/// The figures of one `apns-bridge bench` run.
public struct BenchmarkReport: Sendable {
    /// What was run (partitions as actually used).
    public var settings: BenchmarkSettings
    /// The h2load reference, when it ran.
    public var h2load: H2LoadResult?
    /// Things the reader should know (h2load missing or not all 2xx …).
    public var warnings: [String] = []
    /// Seconds to produce every request and get Kafka's acknowledgements.
    public var produceSeconds = 0.0
    /// Seconds from starting the pipeline to the first result seen (group join + first answers).
    public var startupSeconds = 0.0
    /// Seconds from the first result to the last, by the results' Kafka timestamps.
    public var windowSeconds = 0.0
    /// The same window as the observer received the records.
    public var observedWindowSeconds = 0.0
    /// Seconds to stop the pipeline (drain, flush, final commit).
    public var stopSeconds = 0.0
    /// Wall time of the whole run, h2load included.
    public var totalSeconds = 0.0
    /// CPU seconds of the whole process from the pipeline's start to the last result: the bridge,
    /// the in-process simulator, the mock cluster and the observer together.
    public var processCPUSeconds = 0.0
    /// The same time by thread name, largest first.
    public var threadCPU: [(name: String, seconds: Double)] = []
    /// Peak resident memory of the process.
    public var maxResidentMegabytes = 0.0
    /// Result records seen, and how many said `delivered`.
    public var results = 0
    public var delivered = 0
    /// Missing, duplicated, unreadable or undelivered results.
    public var mismatches: [String] = []
    /// `latency_ms` percentiles of the results.
    public var latencyP50: Double?
    public var latencyP99: Double?
    /// Request records produced and the group's committed offsets summed over the partitions.
    public var producedRecords = 0
    public var committedRecords: Int64 = 0
    /// The pipeline's exit code (0 after a clean stop).
    public var pipelineExitCode: Int32 = -1
    /// How often the bridge paused fetching at `max_in_flight`.
    public var fetchPauses = 0

    /// Creates an empty report for `settings`.
    public init(settings: BenchmarkSettings) {
        self.settings = settings
    }

    /// Every result delivered exactly once, every offset committed, a clean stop.
    public var isComplete: Bool {
        mismatches.isEmpty && results == settings.notifications && delivered == settings.notifications
            && committedRecords == Int64(producedRecords) && pipelineExitCode == 0
    }

    /// Results per second over the window.
    public var notificationsPerSecond: Double {
        Double(results) / max(windowSeconds, 0.001)
    }

    /// Requests per second over the window.
    public var requestsPerSecond: Double {
        notificationsPerSecond / Double(max(settings.tokensPerRequest, 1))
    }

    /// Process CPU microseconds per notification.
    public var cpuMicrosecondsPerNotification: Double {
        processCPUSeconds * 1e6 / Double(max(results, 1))
    }

    /// The bridge's rate as a share of h2load's.
    public var shareOfH2Load: Double? {
        h2load.map { notificationsPerSecond / max($0.requestsPerSecond, 0.001) }
    }

    /// A readable summary, one line per figure.
    public var summary: [String] {
        var lines: [String] = []
        lines.append("workload: \(settings.requests) requests × \(settings.tokensPerRequest) tokens = \(settings.notifications) notifications; \(settings.partitions) partitions, \(settings.connections) connection(s), max_in_flight \(settings.maxInFlight), simulator threads \(settings.simulatorThreads), \(settings.exactlyOnce ? "exactly once" : "at least once")")
        if let h2load {
            lines.append("h2load reference: \(h2load.total) requests in \(Self.format(h2load.seconds, 2)) s = \(Self.format(h2load.requestsPerSecond, 0)) req/s (2xx \(h2load.status2xx), 4xx \(h2load.status4xx), 5xx \(h2load.status5xx), failed \(h2load.failed), errored \(h2load.errored))")
        }
        lines.append("produce: \(Self.format(produceSeconds, 2)) s for \(producedRecords) requests (acknowledged)")
        lines.append("bridge start → first result: \(Self.format(startupSeconds, 2)) s (group join included, not in the window)")
        lines.append("window: \(Self.format(windowSeconds, 2)) s first → last result (observer saw \(Self.format(observedWindowSeconds, 2)) s)")
        lines.append("throughput: \(Self.format(notificationsPerSecond, 0)) notifications/s, \(Self.format(requestsPerSecond, 0)) requests/s"
            + (shareOfH2Load.map { " (\(Self.format($0 * 100, 1)) % of h2load)" } ?? ""))
        lines.append("latency_ms: p50 \(latencyP50.map { Self.format($0, 1) } ?? "-"), p99 \(latencyP99.map { Self.format($0, 1) } ?? "-") (from each request's Kafka timestamp, so time queued in the pre-produced backlog counts)")
        lines.append("CPU: \(Self.format(processCPUSeconds, 2)) s for the process = \(Self.format(cpuMicrosecondsPerNotification, 1)) µs per notification (bridge + in-process simulator + mock Kafka + observer); peak RSS \(Self.format(maxResidentMegabytes, 0)) MB")
        for group in threadCPU.prefix(10) {
            lines.append("  \(group.name): \(Self.format(group.seconds, 2)) s")
        }
        lines.append("stop: \(Self.format(stopSeconds, 2)) s, bridge exit code \(pipelineExitCode); fetch pauses \(fetchPauses)")
        lines.append("results: \(results) seen, \(delivered) delivered; committed offsets \(committedRecords) of \(producedRecords) requests")
        for mismatch in mismatches.prefix(10) {
            lines.append("MISMATCH \(mismatch)")
        }
        for warning in warnings {
            lines.append("WARNING \(warning)")
        }
        lines.append("total wall time: \(Self.format(totalSeconds, 2)) s")
        lines.append(isComplete ? "complete: every notification delivered once, every offset committed"
                                : "INCOMPLETE: see the lines above")
        return lines
    }

    /// The key figures as one line of JSON.
    public var jsonLine: String {
        let fields: [(String, String)] = [
            ("complete", isComplete ? "true" : "false"),
            ("requests", "\(settings.requests)"),
            ("tokens_per_request", "\(settings.tokensPerRequest)"),
            ("notifications", "\(settings.notifications)"),
            ("results", "\(results)"),
            ("delivered", "\(delivered)"),
            ("partitions", "\(settings.partitions)"),
            ("connections", "\(settings.connections)"),
            ("max_in_flight", "\(settings.maxInFlight)"),
            ("simulator_threads", "\(settings.simulatorThreads)"),
            ("exactly_once", "\(settings.exactlyOnce)"),
            ("notifications_per_second", Self.format(notificationsPerSecond, 1)),
            ("requests_per_second", Self.format(requestsPerSecond, 1)),
            ("window_seconds", Self.format(windowSeconds, 3)),
            ("startup_seconds", Self.format(startupSeconds, 3)),
            ("produce_seconds", Self.format(produceSeconds, 3)),
            ("stop_seconds", Self.format(stopSeconds, 3)),
            ("total_seconds", Self.format(totalSeconds, 3)),
            ("latency_ms_p50", latencyP50.map { Self.format($0, 1) } ?? "null"),
            ("latency_ms_p99", latencyP99.map { Self.format($0, 1) } ?? "null"),
            ("cpu_seconds", Self.format(processCPUSeconds, 3)),
            ("cpu_us_per_notification", Self.format(cpuMicrosecondsPerNotification, 2)),
            ("max_rss_mb", Self.format(maxResidentMegabytes, 1)),
            ("committed_offsets", "\(committedRecords)"),
            ("bridge_exit_code", "\(pipelineExitCode)"),
            ("h2load_requests", h2load.map { "\($0.total)" } ?? "null"),
            ("h2load_requests_per_second", h2load.map { Self.format($0.requestsPerSecond, 1) } ?? "null"),
            ("h2load_2xx", h2load.map { "\($0.status2xx)" } ?? "null"),
            ("share_of_h2load", shareOfH2Load.map { Self.format($0, 4) } ?? "null"),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    /// `value` with `decimals` decimals (plain JSON number syntax).
    static func format(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "0" }
        return String(format: "%.\(decimals)f", value)
    }
}
