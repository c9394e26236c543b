import HTTP2
import Kafka
import Metrics
import Observability
import Synchronization

/// Whether the bridge should be counted on (`/readyz`), with the reason when not.
public enum BridgeReadiness: Sendable, Equatable {
    case ready
    case notReady(String)
}

extension BridgePipeline {
    /// How often librdkafka reports statistics (consumer lag) unless `kafka.consumer` sets
    /// `statistics.interval.ms` itself.
    static let defaultStatisticsIntervalMilliseconds = 5000

    /// `kafka.consumer` plus `statistics.interval.ms` when the operator did not set it.
    static func consumerProperties(_ kafka: KafkaSettings) -> [String: String] {
        var properties = kafka.consumer
        if properties["statistics.interval.ms"] == nil {
            properties["statistics.interval.ms"] = String(defaultStatisticsIntervalMilliseconds)
        }
        return properties
    }

    /// Consumer thread (inside `poll`): keeps the lag of the latest statistics.
    func statisticsArrived(_ json: [UInt8]) {
        let snapshot = ConsumerLagStatistics.snapshot(json)
        consumerStatistics.withLock { $0 = snapshot }
    }

    /// A consumer property in milliseconds as the consumer runs with it
    /// (``consumerProperties(_:)``), nil when unset (librdkafka's default applies).
    static func consumerMilliseconds(_ kafka: KafkaSettings, _ name: String) -> Int? {
        consumerProperties(kafka)[name].flatMap { Int($0.filter { !$0.isWhitespace }) }
    }

    /// The statistics interval the consumer runs with (``consumerProperties(_:)``).
    var statisticsIntervalMilliseconds: Int {
        Self.consumerMilliseconds(configuration.kafka, "statistics.interval.ms") ?? Self.defaultStatisticsIntervalMilliseconds
    }

    /// Starts ``PausedPartitionLagProbe``, once per statistics interval, on the partitions that
    /// backpressure or the uncommitted-span bound pause. Without it the lag gauge only misses
    /// a paused partition's new records: a failure to start is logged, not fatal.
    func startLagProbe() {
        let probe = PausedPartitionLagProbe(
            intervalMilliseconds: statisticsIntervalMilliseconds,
            pausedPartitions: { [weak self] in self?.fetchPausedPartitions ?? [] },
            query: { [consumer] partitions, timeout in consumer.watermarks(of: partitions, timeoutMilliseconds: timeout) })
        do {
            try probe.start()
            lagProbe.withLock { $0 = probe }
        } catch {
            logger.warning("the lag of paused partitions will not be followed", metadata: ["error": "\(error)"])
        }
    }

    /// Assigned partitions whose fetching the bridge paused, for whatever reason.
    var fetchPausedPartitions: [KafkaTopicPartition] {
        let paused = Set(fetchHold.withLock { $0.partitions }).union(spanPausedSnapshot)
        let assigned = partitions.withLock { Set($0.keys) }
        return paused.filter { assigned.contains($0) }.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) }
    }

    /// `/readyz`: ready while the consumer is a member of its group (from its first
    /// assignment; not after its partitions were lost until it is assigned again), exactly
    /// once, its producer's transactions are initialised (nothing is sent to APNs before), and
    /// every configured app has a connection ready to take notifications; not while stopping.
    public var readiness: BridgeReadiness {
        if let reason = fatalReason { return .notReady("stopping after a fatal error: \(reason)") }
        if isStopRequested { return .notReady("stopping") }
        guard joinedGroup.load(ordering: .acquiring) else {
            if lostGroup.load(ordering: .relaxed) {
                return .notReady("the consumer lost its partitions in group \(configuration.kafka.groupID) and is rejoining")
            }
            return .notReady("the consumer has not joined group \(configuration.kafka.groupID) yet")
        }
        if let committer, !committer.isReady {
            return .notReady(Self.transactionsNotInitialisedReason)
        }
        let unready = dispatcher.appsWithoutReadyConnection()
        if !unready.isEmpty {
            return .notReady("no APNs connection ready for app \(unready.joined(separator: ", "))")
        }
        return .ready
    }

    /// `/readyz`'s reason while exactly-once transactions are being initialised.
    static let transactionsNotInitialisedReason = "the producer's transactions are not initialised yet (exactly once)"

    /// Nanoseconds since the consumer loop last went round (`/healthz`): it polls at least every
    /// few hundred milliseconds while it runs.
    public var nanosecondsSinceConsumerIteration: UInt64 {
        let now = Timestamp.monotonicNanoseconds()
        let last = lastConsumerIteration.load(ordering: .relaxed)
        return now > last ? now - last : 0
    }

    /// Whether `run()` is running (started and not returned).
    public var isConsuming: Bool {
        consuming.load(ordering: .relaxed)
    }

    /// The event loops that carry APNs traffic (`/healthz` checks that they answer).
    public var eventLoops: [EventLoop] {
        group.loops
    }

    /// Registers the families read at scrape time from the pipeline's state.
    func registerStateMetrics() {
        let registry = metrics.registry
        registry.register(MetricsCollector(
            name: "apns_bridge_in_flight", type: .gauge,
            help: "Notifications waiting for APNs plus output records waiting for Kafka's acknowledgement."
        ) { [weak self] in
            self.map { [MetricSample(value: Double($0.inFlight))] } ?? []
        })
        registry.register(MetricsCollector(
            name: "apns_bridge_partitions_assigned", type: .gauge, help: "Input partitions assigned to this instance."
        ) { [weak self] in
            self.map { [MetricSample(value: Double($0.partitions.withLock { $0.count }))] } ?? []
        })
        registry.register(MetricsCollector(
            name: "apns_bridge_consumer_lag", type: .gauge,
            help: "Records behind the partition's high watermark (librdkafka statistics), by assigned topic and partition."
        ) { [weak self] in
            self?.lagSamples() ?? []
        })
        registry.register(MetricsCollector(
            name: "apns_bridge_connections", type: .gauge, help: "APNs HTTP/2 connections by app and state."
        ) { [weak self] in
            self?.dispatcher.connectionSamples() ?? []
        })
        registry.register(MetricsCollector(
            name: "apns_bridge_ready", type: .gauge,
            help: "1 when the consumer joined its group and every app has a ready APNs connection (as /readyz), else 0."
        ) { [weak self] in
            self.map { [MetricSample(value: $0.readiness == .ready ? 1 : 0)] } ?? []
        })
        registry.register(MetricsCollector(
            name: "apns_bridge_fetch_pauses_total", type: .counter,
            help: "Times fetching paused: limits.max_in_flight reached, no APNs endpoint reachable, until exactly-once transactions are initialised, or partitions holding records behind unfinished ones (10 x max_in_flight; exactly once, outputs weighing half of it)."
        ) { [weak self] in
            self.map { [MetricSample(value: Double($0.fetchPauseCount))] } ?? []
        })
    }

    /// Lag of the partitions assigned now (statistics may still list partitions just revoked);
    /// for those paused now, from their watermarks (``PausedPartitionLagProbe``).
    private func lagSamples() -> [MetricSample] {
        let assigned = partitions.withLock { Set($0.keys) }
        let statistics = consumerStatistics.withLock { $0 }
        var lag = statistics.lag
        if let watermarks = lagProbe.withLock({ $0 })?.watermarks, !watermarks.isEmpty {
            for topicPartition in fetchPausedPartitions {
                lag[topicPartition] = PausedPartitionLagProbe.lag(
                    of: watermarks[topicPartition], committed: statistics.committed[topicPartition], reported: lag[topicPartition])
            }
        }
        return lag.filter { assigned.contains($0.key) }
            .sorted { ($0.key.topic, $0.key.partition) < ($1.key.topic, $1.key.partition) }
            .map { MetricSample(labels: [("topic", $0.key.topic), ("partition", String($0.key.partition))], value: Double($0.value)) }
    }
}
