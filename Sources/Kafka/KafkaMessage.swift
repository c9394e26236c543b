/// A record header: its name, and its value or nil for a null value (Kafka headers may have
/// one, and a dead letter repeats it as it was).
public typealias KafkaHeader = (name: String, value: [UInt8]?)

/// A record read from Kafka.
///
/// Optional properties that hold references are declared `Optional<…>`, not `…?`: a `var x: T?`
/// starts out as nil, and the compiler then copied and destroyed the whole value at the end of
/// every `init` (docs/BENCHMARKS.md).
public struct KafkaMessage: Sendable {
    /// The topic the record was read from.
    public var topic: String
    /// The partition the record was read from.
    public var partition: Int32
    /// The record's offset within its partition.
    public var offset: Int64
    /// The record key, or nil for a null key.
    public var key: Optional<[UInt8]>
    /// The record value, or nil for a null value (a tombstone).
    public var value: Optional<[UInt8]>
    /// The record headers in their original order; a null header value is nil.
    public var headers: [KafkaHeader]
    /// The record timestamp in milliseconds since the epoch, nil when not available.
    public var timestampMilliseconds: Int64?

    /// Creates a message (tests and tools; consumers build them from librdkafka records).
    public init(
        topic: String,
        partition: Int32,
        offset: Int64,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader],
        timestampMilliseconds: Int64?
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// The topic-partition the record belongs to.
    public var topicPartition: KafkaTopicPartition {
        KafkaTopicPartition(topic: topic, partition: partition)
    }

    /// The value of the first header called `name`, or nil (also for a null value).
    public func header(_ name: String) -> [UInt8]? {
        headers.first(where: { $0.name == name })?.value ?? nil
    }
}
