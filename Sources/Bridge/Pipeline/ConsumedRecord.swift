import Kafka
import Observability

/// What the pipeline reads of a consumed record: a copy waiting in the ``AdmissionQueue``
/// (`KafkaMessage`), or one admitted while librdkafka still holds it (`KafkaPolledRecord`).
protocol ConsumedRecord {
    var topic: String { get }
    var partition: Int32 { get }
    var offset: Int64 { get }
    var timestampMilliseconds: Int64? { get }
    var topicPartition: KafkaTopicPartition { get }
    /// The value decoded (a null value is a dead letter).
    func decodeValue(with decoder: PushRequestDecoder, source: RecordSource) -> PushRequestDecoding
    /// The whole record, key and headers included, for a dead letter.
    func message() -> KafkaMessage
}

extension KafkaMessage: ConsumedRecord {
    func decodeValue(with decoder: PushRequestDecoder, source: RecordSource) -> PushRequestDecoding {
        decoder.decode(value: value, source: source)
    }
    func message() -> KafkaMessage { self }
}

extension KafkaPolledRecord: ConsumedRecord {
    func decodeValue(with decoder: PushRequestDecoder, source: RecordSource) -> PushRequestDecoding {
        decoder.decode(borrowing: value, source: source)
    }
}

/// Consumer thread: a record's partition progress, remembered for the last partition seen
/// (records come in runs from one partition) until a rebalance changes the assignment. Saves
/// hashing the topic name, under the lock, for every record.
struct PartitionProgressCache {
    private var generation = -1
    private var topicPartition = KafkaTopicPartition(topic: "", partition: -1)
    private var progress: PartitionProgress?

    /// The progress of `topicPartition` in `partitions`, whose content is at `generation`
    /// (`BridgePipeline.assignmentGeneration`); nil when it is not assigned.
    mutating func progress(of topicPartition: KafkaTopicPartition, generation: Int,
                           in partitions: Locked<[KafkaTopicPartition: PartitionProgress]>) -> PartitionProgress? {
        if generation != self.generation || topicPartition != self.topicPartition {
            progress = partitions.withLock { $0[topicPartition] }
            self.topicPartition = topicPartition
            self.generation = generation
        }
        return progress
    }
}
