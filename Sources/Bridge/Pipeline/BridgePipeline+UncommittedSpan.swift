import Kafka
import Observability
import Synchronization

extension BridgePipeline {
    /// How many records the assigned partitions together may hold consumed and not yet
    /// committable, as a multiple of `limits.max_in_flight` (200,000 by default).
    public static let uncommittedSpanFactor = 10

    /// Consumer thread, every loop iteration: bounds the records consumed behind ones that are
    /// not finished, over all assigned partitions together.
    ///
    /// Offsets are committed in order, so one notification that cannot finish (its app's APNs
    /// endpoint unreachable, waiting without an expiration) holds its partition's commit while
    /// later records of other apps complete around it. Their offsets would pile up in memory
    /// without bound, and a restart would send every one of them again. When the partitions
    /// together hold more than the bound, each one holding at least its share of it (the bound
    /// over the assigned partitions) is paused on its own: the others go on, so a partition
    /// without a stuck record keeps flowing. Bounding the sum, not each partition, keeps memory
    /// and the replay after a restart independent of how many partitions an instance holds.
    /// The paused ones resume once the sum is down to half the bound.
    func boundUncommittedSpans() {
        let bound = configuration.limits.maxInFlight * Self.uncommittedSpanFactor
        let held = spanPausedSnapshot
        var over: [(KafkaTopicPartition, Int)] = []
        var under: [KafkaTopicPartition] = []
        partitions.withLock { map in
            let total = map.values.reduce(0) { $0 + $1.pendingCount }
            if total <= bound / 2 {
                under = map.keys.filter { held.contains($0) }
            } else if total > bound {
                let share = max(1, bound / max(1, map.count))
                for (topicPartition, progress) in map where !held.contains(topicPartition) {
                    let span = progress.pendingCount
                    if span >= share { over.append((topicPartition, span)) }
                }
            }
        }
        if !over.isEmpty { pauseForSpan(over) }
        if !under.isEmpty { resumeAfterSpan(under) }
    }

    private func pauseForSpan(_ over: [(KafkaTopicPartition, Int)]) {
        let list = over.map(\.0)
        do {
            try consumer.pause(list)
        } catch {
            logger.warning("pausing partitions failed", metadata: ["error": "\(error)"])
            return
        }
        spanPausedPartitions.withLock { $0.formUnion(list) }
        fetchPauses.add(1, ordering: .relaxed)
        for (topicPartition, span) in over {
            logger.warning("partition paused: its records wait behind one not finished (is an app's APNs endpoint unreachable?)",
                           metadata: ["kafka.partition": "\(topicPartition)", "bridge.uncommitted_records": "\(span)"])
        }
    }

    private func resumeAfterSpan(_ under: [KafkaTopicPartition]) {
        spanPausedPartitions.withLock { $0.subtract(under) }
        // A partition also held by the in-flight limit resumes with the others, later.
        let globallyPaused = pausedPartitions.withLock { $0 }
        let resumable = under.filter { !globallyPaused.contains($0) }
        guard !resumable.isEmpty else { return }
        do {
            try consumer.resume(resumable)
            logger.info("partition resumed: the uncommitted records are down to half the bound",
                        metadata: ["kafka.partitions": describe(resumable)])
        } catch {
            logger.warning("resuming partitions failed", metadata: ["error": "\(error)"])
        }
    }

    /// Rebalance: revoked partitions leave the span pause, resumed first (librdkafka keeps a
    /// pause across unassignment).
    func releaseSpanPause(of revoked: [KafkaTopicPartition]) {
        let leaving = spanPausedPartitions.withLock { held -> [KafkaTopicPartition] in
            let leaving = revoked.filter { held.contains($0) }
            held.subtract(leaving)
            return leaving
        }
        if !leaving.isEmpty {
            try? consumer.resume(leaving)
        }
    }

    /// Partitions paused by the uncommitted-span bound, for the in-flight limit's resume to leave alone.
    var spanPausedSnapshot: Set<KafkaTopicPartition> {
        spanPausedPartitions.withLock { $0 }
    }
}
