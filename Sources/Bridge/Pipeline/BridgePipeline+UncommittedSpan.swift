import Kafka
import Observability
import Synchronization

extension BridgePipeline {
    /// How many records one partition may hold consumed and not yet committable, as a multiple
    /// of `limits.max_in_flight` (200,000 by default).
    public static let uncommittedSpanFactor = 10

    /// Consumer thread, every loop iteration: bounds, per partition, the records consumed behind
    /// one that is not finished.
    ///
    /// Offsets are committed in order, so one notification that cannot finish (its app's APNs
    /// endpoint unreachable, waiting without an expiration) holds its partition's commit while
    /// later records of other apps complete around it. Their offsets would pile up in memory
    /// without bound, and a restart would send every one of them again. A partition past the
    /// bound is paused on its own (the others go on) and resumes once its span is down to half.
    func boundUncommittedSpans() {
        let bound = configuration.limits.maxInFlight * Self.uncommittedSpanFactor
        let held = spanPausedSnapshot
        var over: [(KafkaTopicPartition, Int)] = []
        var under: [KafkaTopicPartition] = []
        partitions.withLock { map in
            for (topicPartition, progress) in map {
                let span = progress.pendingCount
                if held.contains(topicPartition) {
                    if span <= bound / 2 { under.append(topicPartition) }
                } else if span > bound {
                    over.append((topicPartition, span))
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
            logger.info("partition resumed: its uncommitted records are down to half the bound",
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
