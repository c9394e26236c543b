import Observability
import Synchronization

/// Partitions revoked or lost by rebalances during the current `poll` of a consumer. The
/// rebalance callback adds to it and the polling loop asks, for every record it hands out,
/// whether the record's partition is among them: nearly always there are none, and that answer
/// comes from one atomic load instead of taking the lock.
final class RevokedPartitions: Sendable {
    private let partitions = Locked<[KafkaTopicPartition]>([])
    /// `partitions.count`, stored under the lock after every change.
    private let count = Atomic<Int>(0)

    /// Records partitions revoked or lost.
    func add(_ changed: [KafkaTopicPartition]) {
        partitions.withLock { partitions in
            partitions += changed
            count.store(partitions.count, ordering: .releasing)
        }
    }

    /// Forgets partitions assigned again.
    func remove(_ changed: [KafkaTopicPartition]) {
        partitions.withLock { partitions in
            partitions.removeAll { changed.contains($0) }
            count.store(partitions.count, ordering: .releasing)
        }
    }

    /// Whether `partition` was revoked or lost since the last `takeAll()`.
    func contains(_ partition: KafkaTopicPartition) -> Bool {
        guard count.load(ordering: .acquiring) > 0 else { return false }
        return partitions.withLock { $0.contains(partition) }
    }

    /// Everything recorded since the last call, which starts a new poll's list.
    func takeAll() -> [KafkaTopicPartition] {
        partitions.withLock { partitions in
            defer {
                partitions.removeAll()
                count.store(0, ordering: .releasing)
            }
            return partitions
        }
    }
}
