/// A change of a group member's partition assignment, as reported to
/// ``KafkaConsumer/rebalanceHandler``.
///
/// With the cooperative protocol the lists are incremental: only the partitions that change.
public enum KafkaRebalanceEvent: Sendable, Equatable {
    /// These partitions were added to the assignment (reported after they were assigned).
    case assigned([KafkaTopicPartition])
    /// These partitions are being taken away in an orderly rebalance (reported before they are
    /// unassigned, so in-flight work can still store its offsets).
    case revoked([KafkaTopicPartition])
    /// These partitions were lost (session timeout, fenced): another member may already own
    /// them, so offsets stored for them may not be committed.
    case lost([KafkaTopicPartition])
}
