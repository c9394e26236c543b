/// One partition of one topic.
public struct KafkaTopicPartition: Hashable, Sendable, CustomStringConvertible {
    /// The topic name.
    public var topic: String
    /// The partition number within the topic.
    public var partition: Int32

    /// Creates a topic-partition pair.
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    /// `topic/partition`, for logs.
    public var description: String { "\(topic)/\(partition)" }
}
