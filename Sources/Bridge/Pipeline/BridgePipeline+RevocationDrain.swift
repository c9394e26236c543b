#if canImport(Glibc)
import Glibc
#endif
import Kafka
import Observability
import Synchronization

extension BridgePipeline {
    /// How long a revocation waits for the leaving partitions' work in flight: `shutdown_timeout`
    /// (the time a stop gives the same work), and at most half of `max.poll.interval.ms` (the
    /// consumer does not poll meanwhile) and half of `session.timeout.ms` (librdkafka's defaults:
    /// 300 s and 45 s). Kafka's coordinator keeps a member waiting in a rebalance alive on its
    /// heartbeats, but not every broker does: librdkafka's mock cluster lets the session of a
    /// member that does not rejoin run out, and a member removed from the group cannot commit
    /// what the wait was for.
    static func revocationDrainNanoseconds(_ configuration: BridgeConfiguration) -> UInt64 {
        func half(_ name: String, default value: Int) -> UInt64 {
            // librdkafka takes at most a day for either property: the product cannot overflow.
            UInt64(clamping: min(consumerMilliseconds(configuration.kafka, name) ?? value, 86_400_000)) * 500_000
        }
        return min(configuration.shutdownTimeout.totalNanoseconds,
                   half("max.poll.interval.ms", default: 300_000), half("session.timeout.ms", default: 45_000))
    }

    /// Consumer thread, in a wait inside the rebalance callback: waiting on purpose, not stuck,
    /// so `/healthz` goes on saying the consumer is alive.
    func stampWaitingOnPurpose() {
        lastConsumerIteration.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed)
    }

    /// The monotonic time by which a revocation starting now leaves the rebalance callback: the
    /// drain's wait and the wait for the commit of what it drained end by then (the commit is
    /// given at least a second of its own, see ``commitDrainedOffsets(of:handOverEnds:)``).
    func handOverDeadline() -> UInt64 {
        Timestamp.monotonicNanoseconds() + Self.revocationDrainNanoseconds(configuration)
    }

    /// The deadline for a hand-over's commit: what is left of the hand-over's bound, and at least
    /// a second (a drain that ends at the bound still gets its commit a chance).
    static func handOverCommitDeadline(_ handOverEnds: UInt64, now: UInt64 = Timestamp.monotonicNanoseconds()) -> UInt64 {
        max(handOverEnds, now + 1_000_000_000)
    }

    /// Consumer thread, in the rebalance callback, before partitions handed back to the group
    /// (not lost) let go: waits, until `handOverEnds` (``handOverDeadline()``), for the work in flight of
    /// their records (notifications at APNs, outputs waiting for Kafka's acknowledgement) to
    /// finish, so that their offsets are committed as they leave and the new owner starts after
    /// them. Without the wait, every rebalance (an instance joining or leaving the group) sent
    /// the leaving partitions' notifications in flight to the devices a second time: the new
    /// owner read those records again from the last committed offset.
    ///
    /// No record is admitted meanwhile (the consumer thread waits here); the kept partitions'
    /// work goes on. Work that does not finish in time (APNs unreachable, answers slower than the
    /// wait) is left uncommitted, as before: the new owner sends it again, never loses it.
    /// - Returns: whether it waited (the leaving partitions had work in flight).
    @discardableResult
    func drainLeavingWork(_ leaving: [PartitionProgress], until handOverEnds: UInt64) -> Bool {
        guard !isStopRequested, fatalReason == nil, transactionsReady,
              leaving.contains(where: \.hasWorkInFlight) else { return false }
        let started = Timestamp.monotonicNanoseconds()
        let outcome = BoundedWait(timeoutNanoseconds: handOverEnds > started ? handOverEnds - started : 0).wait(
            now: { Timestamp.monotonicNanoseconds() },
            until: { !leaving.contains(where: \.hasWorkInFlight) },
            shouldStop: { isStopRequested || fatalReason != nil },
            sleep: {
                usleep(1_000)
                stampWaitingOnPurpose()
            }
        )
        let waited = "\((Timestamp.monotonicNanoseconds() - started) / 1_000_000) ms"
        let partitions = describe(leaving.map(\.topicPartition))
        switch outcome {
        case .done:
            logger.info("revoked partitions' work in flight finished before they leave", metadata: [
                "kafka.partitions": partitions, "bridge.waited": waited,
            ])
        case .timedOut, .stopped:
            let unfinished = leaving.filter(\.hasWorkInFlight).reduce(0) { $0 + $1.pendingCount }
            logger.warning("revoked partitions leave with work in flight: their new owner processes those records again", metadata: [
                "kafka.partitions": partitions, "bridge.waited": waited, "bridge.records_pending": "\(unfinished)",
            ])
        }
        return true
    }

    /// At least once, in the rebalance callback after a drain: commits the stored offsets now,
    /// the leaving partitions' among them, rather than leaving them to librdkafka's commit at the
    /// unassign, which reports nothing back. A coordinator refuses a commit while the group
    /// completes a rebalance (librdkafka's mock cluster also while members rejoin): this says so;
    /// librdkafka's commit at the unassign tries once more, and if the group refuses that too
    /// the new owner processes the drained records again. The commit is waited for until
    /// ``handOverCommitDeadline(_:now:)`` only (librdkafka's own synchronous commit waits as long
    /// as the coordinator takes, and up to `session.timeout.ms` for one to be found): the
    /// callback returns, so the consumer goes on polling the partitions it keeps and a stop is
    /// not held up. The partitions themselves leave when librdkafka has the commit's answer: it
    /// rejoins the group only once no commit of its own is outstanding.
    func commitDrainedOffsets(of leaving: [PartitionProgress], handOverEnds: UInt64) {
        stampWaitingOnPurpose()
        defer { stampWaitingOnPurpose() }
        do {
            try consumer.commitSync(until: Self.handOverCommitDeadline(handOverEnds))
        } catch {
            let code = (error as? KafkaError)?.code
            let unanswered = code == KafkaError.Code.answerNotAwaited
            if let code, KafkaError.Code.groupRefusals.contains(code) {
                handOverCommitsRefused.add(1, ordering: .relaxed)
            } else if unanswered {
                handOverCommitsTimedOut.add(1, ordering: .relaxed)
            }
            // Unanswered, the commit goes on inside librdkafka, and the partitions leave once it is answered.
            logger.warning("offsets of revoked partitions not confirmed committed at the hand-over: unless a commit goes through as they leave, their new owner processes those records again",
                           metadata: ["kafka.partitions": describe(leaving.map(\.topicPartition)), "error": "\(error)",
                                      "kafka.commit": unanswered ? "unanswered within the hand-over's bound, going on" : "failed"])
        }
    }
}
