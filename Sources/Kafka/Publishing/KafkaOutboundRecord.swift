/// One record waiting in a producer's outbox: everything `rd_kafka_produceva` needs, owned by Swift.
public struct KafkaOutboundRecord: Sendable {
    /// The topic to produce to.
    public var topic: String
    /// The key, or nil for a null key.
    public var key: [UInt8]?
    /// The value (never null: outputs always have one).
    public var value: [UInt8]
    /// Headers, in order.
    public var headers: [KafkaHeader]
    /// Handed back to the delivery handler.
    public var tag: UInt64

    /// Creates a record.
    public init(topic: String, key: [UInt8]?, value: [UInt8], headers: [KafkaHeader], tag: UInt64) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
        self.tag = tag
    }

    /// Bytes librdkafka will hold for it (key, value and headers), for queue accounting.
    public var payloadSize: Int {
        var size = value.count + (key?.count ?? 0)
        for header in headers { size += header.byteCount }
        return size
    }
}
