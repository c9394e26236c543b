#if canImport(Glibc)
import Glibc
#endif
import Kafka
import Observability
import Synchronization

extension BridgePipeline {
    /// Keeps in-flight work (``workCountedByLimit``) under `limits.max_in_flight`. At the limit the consumer first stops
    /// taking records (they wait in librdkafka's bounded prefetch queue) for up to the grace
    /// period; if the work has not drained by then, it pauses every assigned partition and keeps
    /// polling, so the group never sees this member exceed `max.poll.interval.ms`. Paused
    /// partitions resume once half of the limit has drained (exactly once, also once the work
    /// that can drain is down to half of it: outputs held behind an unfinished record may never).
    ///
    /// While no APNs endpoint can be reached, every assigned partition is paused at once: the
    /// backlog stays in Kafka, not in memory, until a connection opens again.
    func applyBackpressure() {
        let limit = configuration.limits.maxInFlight
        if !transactionsReady {
            // Nothing is admitted before transactions are initialised: fetching waits too.
            pauseAssignedPartitions()
            return
        }
        if dispatcher.everyEndpointUnreachable {
            if !pausedWhileUnreachable.exchange(true, ordering: .relaxed) {
                logger.warning("APNs unreachable: fetching paused until a connection opens", metadata: [
                    "bridge.apns_in_flight": "\(dispatcher.inFlight)",
                ])
            }
            pauseAssignedPartitions()
            return
        }
        if pausedWhileUnreachable.exchange(false, ordering: .relaxed) {
            logger.info("APNs reachable again: fetching resumes once in-flight work is under half of the limit",
                        metadata: ["bridge.in_flight": "\(inFlight)"])
        }
        let work = workCountedByLimit
        if work >= limit, !fetchHold.withLock({ $0.isHeld }) {
            logger.trace("waiting for capacity", metadata: [
                "bridge.apns_in_flight": "\(dispatcher.inFlight)", "bridge.kafka_unacknowledged": "\(publisher.pendingCount)",
            ])
            let exactlyOnce = committer != nil
            var lastSpanCheck: UInt64 = 0
            let outcome = BackpressureWait(limit: limit, graceNanoseconds: backpressureGraceNanoseconds).wait(
                now: { Timestamp.monotonicNanoseconds() },
                inFlight: {
                    // Exactly once, outputs held behind a stuck record fill the limit: the bound
                    // pausing that partition alone (after half the grace) makes room before every
                    // partition is paused. As often as in the loop.
                    if exactlyOnce {
                        boundUncommittedSpans(ifDueAt: Timestamp.monotonicNanoseconds(), lastCheck: &lastSpanCheck)
                    }
                    return workCountedByLimit
                },
                shouldStop: { isStopRequested || fatalReason != nil }, sleep: { usleep(500) }
            )
            if outcome == .pause {
                pauseAssignedPartitions()
            }
        } else if work <= limit / 2 || drainableWorkAllowsResuming(work: work, limit: limit) {
            resumePausedPartitions()
        }
    }

    /// Exactly once, while fetching is paused and the `work` counted by the limit is under it:
    /// whether the work that can drain is down to half the limit. Outputs held behind an
    /// unfinished record leave only when it finishes, which may be never; left under the
    /// uncommitted-span bound, they would keep the work above half the limit and every partition
    /// paused for as long.
    private func drainableWorkAllowsResuming(work countedWork: Int, limit: Int) -> Bool {
        guard committer != nil, countedWork < limit, fetchHold.withLock({ $0.isHeld }) else { return false }
        // The work first: outputs committed between the two reads leave both, and then only
        // delay the resume (read the other way round, they would bring it early).
        let work = inFlight
        let held = partitions.withLock { map in map.values.reduce(0) { $0 + $1.blockedWeight } }
        return work - held <= limit / 2
    }

    /// Consumer thread, once per poll: the partitions the bridge has paused (in-flight limit,
    /// APNs unreachable, uncommitted span), to notice records still coming from one. Empty,
    /// without allocating, while nothing is paused.
    func partitionsPausedByBridge() -> Set<KafkaTopicPartition> {
        let held = fetchHold.withLock { $0.partitions }
        guard spanPausedCount.load(ordering: .relaxed) > 0 else { return Set(held) }
        return held.isEmpty ? spanPausedSnapshot : spanPausedSnapshot.union(held)
    }

    /// Pauses again partitions that delivered records while the bridge had them paused. librdkafka
    /// drops a pause that reaches a partition after a newer operation on it (such as the fetch
    /// start following an assignment), without saying so; the partition would then go on
    /// fetching, and with the in-flight limit reached its records would pile up waiting. The
    /// records themselves are processed as usual.
    func pauseAgain(_ strays: Set<KafkaTopicPartition>) {
        // Only those still paused by the bridge now: a rebalance inside the poll may have let one
        // go (a revoked or lost partition leaves the uncommitted-span bound's pause), and its
        // records are then the partition's own again.
        let stillPaused = partitionsPausedByBridge()
        let assigned = partitions.withLock { map in strays.filter { map[$0] != nil && stillPaused.contains($0) } }
        guard !assigned.isEmpty else { return }
        logger.debug("records came from a partition the bridge paused: pausing it again",
                     metadata: ["kafka.partitions": describe(assigned.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) })])
        do {
            try consumer.pause(Array(assigned))
            repeatedPauses.add(1, ordering: .relaxed)
        } catch {
            logger.warning("pausing partitions again failed", metadata: ["error": "\(error)"])
        }
    }

    private func pauseAssignedPartitions() {
        fetchHold.withLock { hold in
            guard !hold.isHeld, let assignment = try? consumer.assignment() else { return }
            do {
                // Held with no partition assigned too: those assigned later join the pause.
                try consumer.pause(assignment)
                hold = FetchHold(isHeld: true, partitions: assignment)
                guard !assignment.isEmpty else { return }
                fetchPauses.add(1, ordering: .relaxed)
                logger.debug("paused fetching", metadata: ["bridge.in_flight": "\(inFlight)"])
            } catch {
                logger.warning("pausing partitions failed", metadata: ["error": "\(error)"])
            }
        }
    }

    private func resumePausedPartitions() {
        let spanPaused = spanPausedSnapshot
        fetchHold.withLock { hold in
            guard hold.isHeld else { return }
            do {
                // Those also over the uncommitted-span bound stay paused until it lets them go.
                try consumer.resume(hold.partitions.filter { !spanPaused.contains($0) })
                hold = FetchHold()
                logger.debug("resumed fetching", metadata: ["bridge.in_flight": "\(inFlight)"])
            } catch {
                logger.warning("resuming partitions failed", metadata: ["error": "\(error)"])
            }
        }
    }
}

/// Fetching held back by the pipeline's backpressure (`limits.max_in_flight`, APNs unreachable,
/// transactions not initialised yet): whether it is, and the partitions it paused. It stays held
/// until it is let go, however the assignment changes meanwhile: partitions assigned while it is
/// held join the pause, also when every partition it paused has left (lost with the group).
struct FetchHold {
    var isHeld = false
    var partitions: [KafkaTopicPartition] = []
}
