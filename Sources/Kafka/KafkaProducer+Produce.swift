import CRdKafka
import Observability

/// Points at a readable byte for empty (not null) keys and values: librdkafka reads a NULL
/// pointer as a null key or value.
nonisolated(unsafe) private let emptyBytes: UnsafeMutableRawPointer = .allocate(byteCount: 1, alignment: 1)

/// The result of one `rd_kafka_produceva` call.
enum ProduceOutcome: Sendable {
    case accepted
    case queueFull
    case failed(KafkaError)
}

extension KafkaProducer {
    /// One `rd_kafka_produceva` call with RD_KAFKA_MSG_F_COPY. Builds the argument array and
    /// the header names/values in stack-backed temporary buffers: no heap allocation for
    /// native Swift strings and a few small headers.
    func produceOnce(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [(name: String, value: [UInt8])], tag: UInt64,
        partition: Int32? = nil, timestampMilliseconds: Int64? = nil
    ) -> ProduceOutcome {
        KafkaProducer.withOptionalBytes(value) { valueBytes in
            produceOnce(topic: topic, key: key, valueBytes: valueBytes, headers: headers, tag: tag,
                        partition: partition, timestampMilliseconds: timestampMilliseconds)
        }
    }

    /// ``produceOnce(topic:key:value:headers:tag:partition:timestampMilliseconds:)`` with the value
    /// given as bytes (nil: a null value), which librdkafka copies.
    func produceOnce(
        topic: String, key: [UInt8]?, valueBytes: UnsafeRawBufferPointer?, headers: [(name: String, value: [UInt8])],
        tag: UInt64, partition: Int32? = nil, timestampMilliseconds: Int64? = nil
    ) -> ProduceOutcome {
        let rk = clientPointer
        var headerBytes = 0
        for header in headers {
            headerBytes += header.name.utf8.count + 1 + header.value.count
        }
        let argumentCount = 6 + (key == nil ? 0 : 1) + headers.count
        return topic.withCString { topicName in
            KafkaProducer.withOptionalBytes(key) { keyBytes in
                withUnsafeTemporaryAllocation(byteCount: max(headerBytes, 1), alignment: 1) { headerBuffer in
                    withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: argumentCount) { arguments in
                        // Plain local variables, no nested functions capturing them: a captured
                        // variable is boxed and every access to it checked at run time.
                        var index = 0
                        arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_topic(topicName))
                        index += 1
                        if let valueBytes {
                            arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_value(
                                valueBytes.baseAddress ?? UnsafeRawPointer(emptyBytes), valueBytes.count))
                            index += 1
                        }  // no value: a null value (tombstone)
                        if let partition {
                            arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_partition(partition))
                            index += 1
                        }
                        if let timestampMilliseconds {
                            arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_timestamp(timestampMilliseconds))
                            index += 1
                        }
                        if let keyBytes {
                            arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_key(
                                keyBytes.baseAddress ?? UnsafeRawPointer(emptyBytes), keyBytes.count))
                            index += 1
                        }
                        arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_opaque(tag))
                        arguments.initializeElement(at: index + 1, to: apnsb_rd_kafka_vu_msgflags(apnsb_rd_kafka_msg_f_copy()))
                        index += 2
                        // invariant: the header buffer holds at least one byte, so it has an address.
                        let base = headerBuffer.baseAddress!
                        var offset = 0
                        for header in headers {
                            let nameStart = offset
                            offset += KafkaProducer.copy(header.name, to: base + nameStart)
                            base.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self)
                            offset += 1
                            let valueStart = offset
                            offset += header.value.withUnsafeBytes { KafkaProducer.copy($0, to: base + valueStart) }
                            arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_header(
                                (base + nameStart).assumingMemoryBound(to: CChar.self),
                                base + valueStart,
                                header.value.count))
                            index += 1
                        }
                        defer { arguments.baseAddress!.deinitialize(count: index) }  // invariant: capacity >= 4
                        guard let error = rd_kafka_produceva(rk, arguments.baseAddress, index) else {
                            return .accepted
                        }
                        if rd_kafka_error_code(error) == RD_KAFKA_RESP_ERR__QUEUE_FULL {
                            rd_kafka_error_destroy(error)
                            return .queueFull
                        }
                        return .failed(KafkaError(consuming: error, context: "produce to \(topic) failed"))
                    }
                }
            }
        }
    }

    /// Copies `text`'s UTF-8 bytes to `destination`; returns how many.
    private static func copy(_ text: String, to destination: UnsafeMutableRawPointer) -> Int {
        text.withUTF8Bytes { copy(UnsafeRawBufferPointer($0), to: destination) }
    }

    /// Copies `bytes` to `destination`; returns how many.
    private static func copy(_ bytes: UnsafeRawBufferPointer, to destination: UnsafeMutableRawPointer) -> Int {
        if let source = bytes.baseAddress, !bytes.isEmpty {
            destination.copyMemory(from: source, byteCount: bytes.count)
        }
        return bytes.count
    }

    /// Runs `body` with the bytes of `bytes`, or nil when `bytes` is nil.
    private static func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard let bytes else { return body(nil) }
        return bytes.withUnsafeBytes { body($0) }
    }
}
