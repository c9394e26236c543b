import Kafka
import Observability
import Synchronization

extension BridgePipeline {
    /// How many records the assigned partitions together may hold consumed and not yet
    /// committable, as a multiple of `limits.max_in_flight` (200,000 by default). At least once.
    public static let uncommittedSpanFactor = 10

    /// How often ``boundUncommittedSpans()`` runs at most: it takes a lock per partition, and
    /// the bound is passed by 10 ms of records at most.
    static let spanCheckIntervalNanoseconds: UInt64 = 10_000_000

    /// Runs ``boundUncommittedSpans()`` when ``spanCheckIntervalNanoseconds`` have passed since
    /// `lastCheck`, and then sets `lastCheck` to `now`.
    func boundUncommittedSpans(ifDueAt now: UInt64, lastCheck: inout UInt64) {
        guard now &- lastCheck >= Self.spanCheckIntervalNanoseconds else { return }
        lastCheck = now
        boundUncommittedSpans()
    }

    /// Consumer thread, at most every ``spanCheckIntervalNanoseconds``: bounds what the assigned partitions together hold
    /// behind records that are not finished.
    ///
    /// Offsets are committed in order, so one notification that cannot finish (its app's APNs
    /// endpoint unreachable, waiting without an expiration) holds its partition's commit while
    /// later records of other apps complete around it. At least once their offsets would pile up
    /// in memory without bound, and a restart would send every one of them again; exactly once
    /// their outputs wait too (a transaction carries a partition's outputs in offset order), and
    /// as in-flight work they would soon fill `limits.max_in_flight` and stop every partition.
    ///
    /// What a partition holds is its records consumed and not committable (at least once, bound
    /// ``uncommittedSpanFactor`` × `max_in_flight`) or the weight of its outputs waiting behind an
    /// unfinished record (exactly once, bound half of `max_in_flight`, so the held outputs are
    /// caught before the in-flight limit stops every partition). A partition holding more than its
    /// share of the bound is paused on its own (``UncommittedSpanBound`` decides when, and when it
    /// resumes): the others go on, so a partition without a stuck record keeps flowing. Bounding
    /// the sum, not each partition, keeps memory and the replay after a restart independent of how
    /// many partitions an instance holds. Exactly once, the outputs a paused partition holds leave
    /// the in-flight work that `max_in_flight` limits (``workCountedByLimit``): they are bounded
    /// here, by the pause.
    func boundUncommittedSpans() {
        let exactlyOnce = committer != nil
        let held = spanPausedSnapshot
        let spans = partitions.withLock { map in map.mapValues { exactlyOnce ? $0.blockedWeight : $0.pendingCount } }
        let decision = spanBound.withLock { $0.decide(spans: spans, paused: held, now: Timestamp.monotonicNanoseconds()) }
        if !decision.pause.isEmpty {
            pauseForSpan(decision.pause, measuring: exactlyOnce ? "bridge.held_outputs" : "bridge.uncommitted_records")
        }
        if !decision.resume.isEmpty { resumeAfterSpan(decision.resume) }
    }

    /// The bound's decisions for this configuration: at least once ``uncommittedSpanFactor`` ×
    /// `max_in_flight` records, at once; exactly once half of `max_in_flight` in held outputs,
    /// after half the backpressure grace (so that a hold that fills the in-flight limit pauses its
    /// partition before the limit's wait, of the whole grace, pauses every partition).
    static func uncommittedSpanBound(_ configuration: BridgeConfiguration, grace: Duration)
        -> UncommittedSpanBound<KafkaTopicPartition> {
        let limit = configuration.limits.maxInFlight
        return configuration.kafka.exactlyOnce
            ? UncommittedSpanBound(bound: max(1, limit / 2), graceNanoseconds: grace.totalNanoseconds / 2,
                                   pausedPartitionsLeaveTheSum: true)
            : UncommittedSpanBound(bound: limit * uncommittedSpanFactor, graceNanoseconds: 0,
                                   pausedPartitionsLeaveTheSum: false)
    }

    /// The in-flight work `limits.max_in_flight` limits: ``inFlight`` less, exactly once, the
    /// outputs that partitions paused by ``boundUncommittedSpans()`` hold behind an unfinished
    /// record (bounded by that pause instead). Read after ``inFlight``, so a concurrent change
    /// makes it briefly low, never high.
    var workCountedByLimit: Int {
        let work = inFlight
        guard committer != nil, spanPausedCount.load(ordering: .relaxed) > 0 else { return work }
        let paused = spanPausedSnapshot
        let held = partitions.withLock { map in paused.reduce(0) { $0 + (map[$1]?.blockedWeight ?? 0) } }
        return max(0, work - held)
    }

    private func pauseForSpan(_ over: [(partition: KafkaTopicPartition, span: Int)], measuring measure: String) {
        let list = over.map(\.partition)
        do {
            try consumer.pause(list)
        } catch {
            logger.warning("pausing partitions failed", metadata: ["error": "\(error)"])
            return
        }
        spanPausedPartitions.withLock { held in
            held.formUnion(list)
            spanPausedCount.store(held.count, ordering: .relaxed)
        }
        // Partitions the in-flight limit already holds were not fetching: no new pause to count.
        if fetchHold.withLock({ hold in list.contains { !hold.partitions.contains($0) } }) {
            fetchPauses.add(1, ordering: .relaxed)
        }
        for (topicPartition, span) in over {
            logger.warning("partition paused: its records wait behind one not finished (is an app's APNs endpoint unreachable?)",
                           metadata: ["kafka.partition": "\(topicPartition)", measure: "\(span)"])
        }
    }

    private func resumeAfterSpan(_ under: [KafkaTopicPartition]) {
        spanPausedPartitions.withLock { held in
            held.subtract(under)
            spanPausedCount.store(held.count, ordering: .relaxed)
        }
        // A partition also held by the in-flight limit resumes with the others, later.
        let globallyPaused = fetchHold.withLock { $0.partitions }
        let resumable = under.filter { !globallyPaused.contains($0) }
        guard !resumable.isEmpty else { return }
        do {
            try consumer.resume(resumable)
            logger.info("partition resumed: what it holds behind unfinished records is down to half the bound",
                        metadata: ["kafka.partitions": describe(resumable)])
        } catch {
            logger.warning("resuming partitions failed", metadata: ["error": "\(error)"])
        }
    }

    /// Rebalance: revoked partitions leave the span pause, resumed first (librdkafka keeps a
    /// pause across unassignment), and their grace is forgotten.
    func releaseSpanPause(of revoked: [KafkaTopicPartition]) {
        spanBound.withLock { $0.forget(revoked) }
        let leaving = spanPausedPartitions.withLock { held -> [KafkaTopicPartition] in
            let leaving = revoked.filter { held.contains($0) }
            held.subtract(leaving)
            spanPausedCount.store(held.count, ordering: .relaxed)
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
