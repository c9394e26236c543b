import CRdKafka

/// A record as librdkafka holds it, handed to the closure of
/// ``KafkaConsumer/poll(maxMessages:timeoutMilliseconds:handling:)``. **Valid only during that
/// call**: do not keep it, or its `value` buffer, past it; ``message()`` makes a copy that lasts.
///
/// Its key and headers are read only when ``message()`` asks for them: librdkafka parses a
/// record's headers on first access (for every record it fetched in the v2 format, which always
/// carries a header count, even of zero), and that parse costs about as much as everything else
/// the consumer does to hand a record over.
public struct KafkaPolledRecord {
    private let native: UnsafePointer<rd_kafka_message_t>
    /// The topic the record was read from.
    public let topic: String

    init(_ native: UnsafePointer<rd_kafka_message_t>, topic: String) {
        self.native = native
        self.topic = topic
    }

    /// The partition the record was read from.
    public var partition: Int32 { native.pointee.partition }

    /// The record's offset within its partition.
    public var offset: Int64 { native.pointee.offset }

    /// The topic-partition the record belongs to.
    public var topicPartition: KafkaTopicPartition {
        KafkaTopicPartition(topic: topic, partition: native.pointee.partition)
    }

    /// The record timestamp in milliseconds since the epoch, nil when not available.
    public var timestampMilliseconds: Int64? {
        let timestamp = rd_kafka_message_timestamp(native, nil)
        return timestamp >= 0 ? timestamp : nil
    }

    /// The value's bytes, or nil for a null value (a tombstone); valid only during the call.
    public var value: UnsafeRawBufferPointer? {
        native.pointee.payload.map { UnsafeRawBufferPointer(start: $0, count: native.pointee.len) }
    }

    /// A copy of the whole record (key, value and headers) that outlives the call.
    public func message() -> KafkaMessage {
        KafkaMessage(native, topic: topic)
    }
}
