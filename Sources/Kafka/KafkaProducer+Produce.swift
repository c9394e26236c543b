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

/// The headers of one produce call: a list, or one header whose value is read from memory the
/// caller keeps valid during the call (no array made for it).
enum ProduceHeaders {
    case list([KafkaHeader])
    case one(name: String, value: UnsafeRawBufferPointer)

    var count: Int {
        switch self {
        case .list(let headers): headers.count
        case .one: 1
        }
    }

    /// Bytes the names (each NUL-terminated) and values take.
    var byteCount: Int {
        switch self {
        case .list(let headers): headers.reduce(0) { $0 + $1.byteCount + 1 }
        case .one(let name, let value): name.utf8.count + 1 + value.count
        }
    }
}

extension KafkaProducer {
    /// One `rd_kafka_produceva` call with RD_KAFKA_MSG_F_COPY. Builds the argument array and
    /// the header names/values in stack-backed temporary buffers: no heap allocation for
    /// native Swift strings and a few small headers.
    func produceOnce(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader], tag: UInt64,
        partition: Int32? = nil, timestampMilliseconds: Int64? = nil
    ) -> ProduceOutcome {
        KafkaProducer.withOptionalBytes(key) { keyBytes in
            KafkaProducer.withOptionalBytes(value) { valueBytes in
                produceOnce(topic: topic, keyBytes: keyBytes, valueBytes: valueBytes, headers: .list(headers), tag: tag,
                            partition: partition, timestampMilliseconds: timestampMilliseconds)
            }
        }
    }

    /// ``produceOnce(topic:key:value:headers:tag:partition:timestampMilliseconds:)`` with key and
    /// value given as bytes (nil: null), which librdkafka copies.
    func produceOnce(
        topic: String, keyBytes: UnsafeRawBufferPointer?, valueBytes: UnsafeRawBufferPointer?, headers: ProduceHeaders,
        tag: UInt64, partition: Int32? = nil, timestampMilliseconds: Int64? = nil
    ) -> ProduceOutcome {
        let rk = clientPointer
        let headerBytes = headers.byteCount
        let argumentCount = 6 + (keyBytes == nil ? 0 : 1) + headers.count
        return topic.withCString { topicName in
            withUnsafeTemporaryAllocation(byteCount: max(headerBytes, 1), alignment: 1) { headerBuffer in
                withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: argumentCount) { arguments in
                    // Plain local variables, no nested functions capturing them: a captured
                    // variable is boxed and every access to it checked at run time.
                    var index = 0
                    if let handle = topicHandle(topic) {
                        arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_rkt(handle))
                    } else {
                        arguments.initializeElement(at: index, to: apnsb_rd_kafka_vu_topic(topicName))
                    }
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
                    switch headers {
                    case .list(let list):
                        var offset = 0
                        for header in list {
                            let written = header.withNameBytes { name in
                                KafkaProducer.withOptionalBytes(header.value) {
                                    KafkaProducer.header(name, $0, at: base + offset)
                                }
                            }
                            arguments.initializeElement(at: index, to: written.argument)
                            index += 1
                            offset += written.byteCount
                        }
                    case .one(let name, let value):
                        let written = name.withUTF8Bytes { KafkaProducer.header(UnsafeRawBufferPointer($0), value, at: base) }
                        arguments.initializeElement(at: index, to: written.argument)
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

    /// Writes a header's name (NUL-terminated) and value to `destination`; returns its argument
    /// for `rd_kafka_produceva`, pointing there, and how many bytes it took. A nil value is a
    /// null header value (librdkafka reads a NULL pointer so).
    private static func header(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer?,
                               at destination: UnsafeMutableRawPointer) -> (argument: rd_kafka_vu_t, byteCount: Int) {
        var offset = copy(name, to: destination)
        destination.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self)
        offset += 1
        guard let value else {
            return (apnsb_rd_kafka_vu_header(destination.assumingMemoryBound(to: CChar.self), nil, 0), offset)
        }
        let valueStart = destination + offset
        offset += copy(value, to: valueStart)
        let argument = apnsb_rd_kafka_vu_header(destination.assumingMemoryBound(to: CChar.self), valueStart, value.count)
        return (argument, offset)
    }

    /// Copies `bytes` to `destination`; returns how many.
    private static func copy(_ bytes: UnsafeRawBufferPointer, to destination: UnsafeMutableRawPointer) -> Int {
        if let source = bytes.baseAddress, !bytes.isEmpty {
            destination.copyMemory(from: source, byteCount: bytes.count)
        }
        return bytes.count
    }

    /// Runs `body` with the bytes of `bytes`, or nil when `bytes` is nil.
    static func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard let bytes else { return body(nil) }
        return bytes.withUnsafeBytes { body($0) }
    }
}
