#if canImport(Glibc)
import Glibc
#endif
import CRdKafka

extension KafkaMessage {
    /// Copies a consumed librdkafka record (which must have `err == 0`) of topic `topic`.
    init(_ message: UnsafePointer<rd_kafka_message_t>, topic: String) {
        let record = message.pointee
        var headers: [KafkaHeader] = []
        var headerList: OpaquePointer?
        if rd_kafka_message_headers(message, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            headers.reserveCapacity(rd_kafka_header_cnt(headerList))
            var index = 0
            var name: UnsafePointer<CChar>?
            var value: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(headerList, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                // A NULL value is a null header value, kept as nil (not read as empty).
                let bytes = value.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: size)) }
                let nameBytes = UnsafeRawBufferPointer(start: name, count: name.map { strlen($0) } ?? 0)
                headers.append(KafkaHeader(nameBytes: nameBytes, value: bytes))
                index += 1
            }
        }
        let timestamp = rd_kafka_message_timestamp(message, nil)
        self.init(
            topic: topic,
            partition: record.partition,
            offset: record.offset,
            key: record.key.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: record.key_len)) },
            value: record.payload.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: record.len)) },
            headers: headers,
            timestampMilliseconds: timestamp >= 0 ? timestamp : nil
        )
    }
}

/// The name of the last topic handle (`rkt`) a consumer saw, so a batch of records from one topic
/// decodes the name once.
struct TopicNameCache {
    private var handle: OpaquePointer?
    private var name = ""

    /// The name of `message`'s topic ("" when it has no topic handle).
    mutating func name(of message: UnsafePointer<rd_kafka_message_t>) -> String {
        let topic = message.pointee.rkt
        if handle != topic || handle == nil {
            handle = topic
            name = topic.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        }
        return name
    }
}
