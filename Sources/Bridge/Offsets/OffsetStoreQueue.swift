import Kafka
import Observability

/// At least once: the partitions whose committable offset grew since it was last stored.
///
/// A completion (a delivery report, on the producer's publisher thread) queues its partition
/// once, however many of its records complete before the next store; the consumer thread stores
/// every queued partition's newest committable offset once per loop iteration
/// (`storeQueued()`). One `rd_kafka_offsets_store` per partition and iteration instead of one
/// per record: with a poll of a thousand records over a few dozen partitions, a few dozen calls
/// instead of a thousand.
///
/// A partition refers to its queue weakly (the queue holds the partitions queued in it), so a
/// queue that is never drained is freed with what it holds.
///
/// The offset is stored under the partition's lock (``PartitionProgress/storeQueuedOffset(_:)``),
/// so the guarantee of `revoke()` holds whichever thread stores: once it returns, nothing of that
/// partition is stored again. librdkafka commits stored offsets every `auto.commit.interval.ms`
/// and on close; the pipeline stores what is queued before each of those can matter (each loop
/// iteration, before a revocation, before closing the consumer).
final class OffsetStoreQueue: Sendable {
    private let queued = Locked<[PartitionProgress]>([])
    /// Stores one partition's next offset to commit (called under that partition's lock).
    let store: @Sendable (KafkaTopicPartition, Int64) -> Void

    init(store: @escaping @Sendable (KafkaTopicPartition, Int64) -> Void) {
        self.store = store
    }

    /// Any thread: `progress` has a grown committable offset and is not queued yet.
    func enqueue(_ progress: PartitionProgress) {
        queued.withLock { $0.append(progress) }
    }

    /// Partitions queued and not stored yet.
    var count: Int { queued.withLock { $0.count } }

    /// A revocation (consumer thread, in the rebalance callback): what completed in the leaving
    /// partitions is stored, since librdkafka commits the stored offsets as they leave, and they
    /// are revoked in the same step, so nothing of theirs is stored again. Without the store the
    /// completions since the last loop pass would be read and sent again by the new owner.
    func revoke(_ leaving: [PartitionProgress]) {
        storeQueued()
        for progress in leaving { progress.storeAndRevoke(store) }
    }

    /// Stores the newest committable offset of every queued partition, once each.
    func storeQueued() {
        var taken: [PartitionProgress] = []
        queued.withLock { swap(&taken, &$0) }
        for progress in taken {
            progress.storeQueuedOffset(store)
        }
    }
}
