#if canImport(Glibc)
import Glibc
#endif
import Kafka
import Observability
import Synchronization

extension BridgePipeline {
    /// How long a revocation waits for the leaving partitions' work in flight: `shutdown_timeout`
    /// (the time a stop gives the same work), and at most half of `max.poll.interval.ms`
    /// (librdkafka's default 300 s), since the consumer does not poll meanwhile.
    static func revocationDrainNanoseconds(_ configuration: BridgeConfiguration) -> UInt64 {
        let pollInterval = consumerProperties(configuration.kafka)["max.poll.interval.ms"]
            .flatMap { UInt64($0.filter { !$0.isWhitespace }) } ?? 300_000
        return min(configuration.shutdownTimeout.totalNanoseconds, pollInterval.multipliedReportingOverflow(by: 500_000).partialValue)
    }

    /// Consumer thread, in the rebalance callback, before partitions handed back to the group
    /// (not lost) let go: waits, up to ``revocationDrainNanoseconds(_:)``, for the work in flight of
    /// their records (notifications at APNs, outputs waiting for Kafka's acknowledgement) to
    /// finish, so that their offsets are committed as they leave and the new owner starts after
    /// them. Without the wait, every rebalance (an instance joining or leaving the group) sent
    /// the leaving partitions' notifications in flight to the devices a second time: the new
    /// owner read those records again from the last committed offset.
    ///
    /// No record is admitted meanwhile (the consumer thread waits here); the kept partitions'
    /// work goes on. Work that does not finish in time (APNs unreachable, answers slower than the
    /// wait) is left uncommitted, as before: the new owner sends it again, never loses it.
    func drainLeavingWork(_ leaving: [PartitionProgress]) {
        guard !isStopRequested, fatalReason == nil, transactionsReady,
              leaving.contains(where: \.hasWorkInFlight) else { return }
        let started = Timestamp.monotonicNanoseconds()
        let outcome = BoundedWait(timeoutNanoseconds: Self.revocationDrainNanoseconds(configuration)).wait(
            now: { Timestamp.monotonicNanoseconds() },
            until: { !leaving.contains(where: \.hasWorkInFlight) },
            shouldStop: { isStopRequested || fatalReason != nil },
            sleep: {
                usleep(1_000)
                // Waiting on purpose, not stuck: `/healthz` goes on saying so.
                lastConsumerIteration.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed)
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
    }
}
