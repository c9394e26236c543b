/// A change of a group member's partition assignment, as reported to
/// ``KafkaConsumer/rebalanceHandler``.
///
/// With the cooperative protocol the lists are incremental: only the partitions that change.
public enum KafkaRebalanceEvent: Sendable, Equatable {
    /// These partitions are added to the assignment (reported just before they are assigned:
    /// pausing them then holds from their first fetch).
    case assigned([KafkaTopicPartition])
    /// These partitions are being taken away in an orderly rebalance (reported before they are
    /// unassigned, so in-flight work can still store its offsets).
    case revoked([KafkaTopicPartition])
    /// These partitions were lost (session timeout, fenced): another member may already own
    /// them, so offsets stored for them may not be committed.
    case lost([KafkaTopicPartition])
}
