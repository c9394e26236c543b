import Bridge
import Foundation

/// The figures of one `apns-bridge bench` run.
public struct BenchmarkReport: Sendable {
    /// What one `apns-bridge run` instance did in one peak round.
    public struct InstanceRun: Sendable {
        /// Notifications it finished in the round's peak run (its `apns_bridge_notifications_total`).
        public var notifications = 0
        /// Its CPU seconds (all its threads) over the peak run.
        public var cpuSeconds = 0.0
        /// The same time by thread name, largest first.
        public var threadCPU: [(name: String, seconds: Double)] = []

        /// What an instance did: `threadCPU` by thread name, largest first.
        public init(notifications: Int = 0, cpuSeconds: Double = 0, threadCPU: [(name: String, seconds: Double)] = []) {
            self.notifications = notifications
            self.cpuSeconds = cpuSeconds
            self.threadCPU = threadCPU
        }
    }

    /// How one `apns-bridge run` instance ended.
    public struct Instance: Sendable {
        /// Its exit code after SIGTERM (0 after a clean stop), -1 before.
        public var exitCode: Int32 = -1
        /// Its peak resident memory up to its stop (the kernel's `VmHWM` for it, read just before
        /// SIGTERM: the drain after it is not counted).
        public var maxResidentMegabytes = 0.0
        /// Its CPU seconds over its whole life (start, warm-up, every run, stop), from `wait4`.
        public var lifetimeCPUSeconds = 0.0

        /// How an instance ended (exit code -1: not stopped yet).
        public init(exitCode: Int32 = -1, maxResidentMegabytes: Double = 0, lifetimeCPUSeconds: Double = 0) {
            self.exitCode = exitCode
            self.maxResidentMegabytes = maxResidentMegabytes
            self.lifetimeCPUSeconds = lifetimeCPUSeconds
        }
    }

    /// One peak round: h2load's reference run, then the bridge's peak run right after it on the
    /// same simulator, so that both see the machine in the same minute.
    public struct PeakRound: Sendable {
        /// The round's h2load run, when the reference was measured.
        public var h2load: H2LoadResult?
        /// Seconds to produce the peak run's requests and get Kafka's acknowledgements.
        public var produceSeconds = 0.0
        /// Milliseconds from the instances' continuing, once the requests were all produced, to
        /// the first result (the result's Kafka timestamp): never negative, since the instances
        /// are stopped while the requests are produced. Nil when no result came.
        public var firstResultAfterProducedMilliseconds: Int64?
        /// Seconds from the first result to the last, by the results' Kafka timestamps.
        public var windowSeconds = 0.0
        /// The same window as the observer received the records.
        public var observedWindowSeconds = 0.0
        /// Every instance's share, in start order.
        public var instances: [InstanceRun] = []
        /// CPU seconds of the benchmark process itself over the peak run: simulator, mock
        /// cluster, producer and observer (not the bridge, not h2load).
        public var benchmarkProcessCPUSeconds = 0.0
        /// Result records seen, and how many said `delivered`.
        public var results = 0
        public var delivered = 0
        /// `latency_ms` percentiles of the results (they include the backlog's wait).
        public var latencyP50: Double?
        public var latencyP99: Double?

        /// An empty round, to be filled in.
        public init() {}

        /// Results per second over the window.
        public var notificationsPerSecond: Double {
            Double(results) / max(windowSeconds, 0.001)
        }

        /// CPU seconds of every instance over the peak run.
        public var bridgeCPUSeconds: Double {
            instances.reduce(0) { $0 + $1.cpuSeconds }
        }

        /// The bridge's CPU microseconds per notification (its own processes only).
        public var bridgeCPUMicrosecondsPerNotification: Double {
            bridgeCPUSeconds * 1e6 / Double(max(results, 1))
        }

        /// The bridge's CPU per notification over h2load's CPU per request in the same round.
        public var cpuRatioToH2Load: Double? {
            h2load?.cpuMicrosecondsPerRequest.map { bridgeCPUMicrosecondsPerNotification / max($0, 0.001) }
        }

        /// The bridge's rate as a share of h2load's in the same round.
        public var shareOfH2Load: Double? {
            h2load.map { notificationsPerSecond / max($0.requestsPerSecond, 0.001) }
        }

        /// An instance's notifications per second over the window.
        public func notificationsPerSecond(of instance: InstanceRun) -> Double {
            Double(instance.notifications) / max(windowSeconds, 0.001)
        }
    }

    /// What was run (partitions as actually used).
    public var settings: BenchmarkSettings
    /// Every peak round, in order.
    public var rounds: [PeakRound] = []
    /// Things the reader should know (h2load missing or not all 2xx …).
    public var warnings: [String] = []
    /// Seconds of the warm-up: from the instances' start until they joined the group and answered.
    public var startupSeconds = 0.0
    /// Seconds to stop the instances (drain, flush, final commit).
    public var stopSeconds = 0.0
    /// Wall time of the whole run, h2load included.
    public var totalSeconds = 0.0
    /// How the instances ended, in start order.
    public var instances: [Instance] = []
    /// Missing, duplicated, unreadable or undelivered results of any round or of the paced run.
    public var mismatches: [String] = []
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

    /// The index of the round whose figures the report gives: of median share of h2load when
    /// every round has one, else of median rate (of an even count, the lower of the middle two:
    /// the stricter for the bridge).
    public var medianRoundIndex: Int? {
        guard !rounds.isEmpty else { return nil }
        let shares = rounds.compactMap(\.shareOfH2Load)
        let keys = shares.count == rounds.count ? shares : rounds.map(\.notificationsPerSecond)
        return keys.indices.sorted { keys[$0] < keys[$1] }[(keys.count - 1) / 2]
    }

    /// The round of `medianRoundIndex` (empty figures before any round ran).
    public var peak: PeakRound {
        medianRoundIndex.map { rounds[$0] } ?? PeakRound()
    }

    /// Every instance stopped cleanly.
    public var instancesExitedCleanly: Bool {
        instances.count == settings.instances && instances.allSatisfy { $0.exitCode == 0 }
    }

    /// Every round ran and every result of each was delivered exactly once, every offset
    /// committed, clean stops.
    public var isComplete: Bool {
        mismatches.isEmpty && rounds.count == settings.rounds
            && rounds.allSatisfy { $0.results == settings.notifications && $0.delivered == settings.notifications }
            && committedRecords == Int64(producedRecords) && instancesExitedCleanly
    }

    /// Peak requests per second (of the median round).
    public var requestsPerSecond: Double {
        peak.notificationsPerSecond / Double(max(settings.tokensPerRequest, 1))
    }

    /// The largest peak RSS of the instances.
    public var maxResidentMegabytes: Double {
        instances.map(\.maxResidentMegabytes).max() ?? 0
    }

    /// `value` with `decimals` decimals (plain JSON number syntax).
    static func format(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "0" }
        return String(format: "%.\(decimals)f", value)
    }
}
