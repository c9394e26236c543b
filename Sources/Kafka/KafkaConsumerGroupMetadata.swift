import CRdKafka

/// A snapshot of a consumer's group membership (group id, generation, member id), as a
/// transactional producer sends it with consumed offsets (``KafkaProducer/sendOffsetsToTransaction(_:groupMetadata:timeoutMilliseconds:)``).
public final class KafkaConsumerGroupMetadata: @unchecked Sendable {
    private let pointer: OpaquePointer

    init(pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        rd_kafka_consumer_group_metadata_destroy(pointer)
    }

    func withPointer<R>(_ body: (OpaquePointer) -> R) -> R {
        body(pointer)
    }
}

extension KafkaConsumer {
    /// The consumer's current group metadata. Any thread; it may wait briefly for librdkafka's
    /// main thread.
    /// - Throws: ``KafkaError`` when the consumer is closed.
    public func groupMetadata() throws -> KafkaConsumerGroupMetadata {
        try withOpenHandle { rk throws(KafkaError) in
            guard let pointer = rd_kafka_consumer_group_metadata(rk) else {
                throw KafkaError(code: KafkaError.Code.invalidArgument, message: "the consumer has no group metadata")
            }
            return KafkaConsumerGroupMetadata(pointer: pointer)
        }
    }
}
