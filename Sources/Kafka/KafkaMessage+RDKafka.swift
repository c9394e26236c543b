import CRdKafka

extension KafkaMessage {
    /// Copies a consumed librdkafka record (which must have `err == 0`).
    ///
    /// - Parameter topicName: the cached name of the message's topic handle (`rkt`); replaced
    ///   when this record belongs to another topic, so a batch from one topic decodes the name once.
    init(_ message: UnsafePointer<rd_kafka_message_t>, topicName: inout (handle: OpaquePointer?, name: String)) {
        let record = message.pointee
        if topicName.handle != record.rkt || topicName.handle == nil {
            topicName = (record.rkt, record.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? "")
        }
        var headers: [(name: String, value: [UInt8])] = []
        var headerList: OpaquePointer?
        if rd_kafka_message_headers(message, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            headers.reserveCapacity(rd_kafka_header_cnt(headerList))
            var index = 0
            var name: UnsafePointer<CChar>?
            var value: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(headerList, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let bytes = value.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                headers.append((name: name.map { String(cString: $0) } ?? "", value: bytes))
                index += 1
            }
        }
        let timestamp = rd_kafka_message_timestamp(message, nil)
        self.init(
            topic: topicName.name,
            partition: record.partition,
            offset: record.offset,
            key: record.key.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: record.key_len)) },
            value: record.payload.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: record.len)) },
            headers: headers,
            timestampMilliseconds: timestamp >= 0 ? timestamp : nil
        )
    }
}
