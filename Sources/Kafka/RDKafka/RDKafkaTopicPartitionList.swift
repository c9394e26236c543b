import CRdKafka

/// An owned `rd_kafka_topic_partition_list_t`, destroyed with this object.
final class RDKafkaTopicPartitionList {
    /// The list; do not let it escape this object's lifetime.
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    /// An empty list with room for `capacity` entries.
    init(capacity: Int) {
        // invariant: rd_kafka_topic_partition_list_new only returns NULL when out of memory.
        pointer = rd_kafka_topic_partition_list_new(Int32(clamping: max(capacity, 1)))!
    }

    /// A list of `partitions`, every offset set to `offset`.
    convenience init(_ partitions: [KafkaTopicPartition], offset: Int64? = nil) {
        self.init(capacity: partitions.count)
        for partition in partitions {
            add(partition, offset: offset)
        }
    }

    deinit {
        rd_kafka_topic_partition_list_destroy(pointer)
    }

    /// Appends one entry (with `offset`, if given).
    func add(_ partition: KafkaTopicPartition, offset: Int64? = nil) {
        // invariant: rd_kafka_topic_partition_list_add returns the new element, never NULL.
        let element = rd_kafka_topic_partition_list_add(pointer, partition.topic, partition.partition)!
        if let offset {
            element.pointee.offset = offset
        }
    }

    /// The entries of a list (owned or borrowed) as Swift values.
    static func partitions(of list: UnsafePointer<rd_kafka_topic_partition_list_t>?) -> [KafkaTopicPartition] {
        entries(of: list).map(\.partition)
    }

    /// Each entry of a list with its offset and error code.
    static func entries(
        of list: UnsafePointer<rd_kafka_topic_partition_list_t>?
    ) -> [(partition: KafkaTopicPartition, offset: Int64, error: rd_kafka_resp_err_t)] {
        guard let list, let elements = list.pointee.elems else { return [] }
        let count = Int(list.pointee.cnt)
        var result: [(partition: KafkaTopicPartition, offset: Int64, error: rd_kafka_resp_err_t)] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            let element = elements[index]
            let topic = element.topic.map { String(cString: $0) } ?? ""
            result.append((KafkaTopicPartition(topic: topic, partition: element.partition), element.offset, element.err))
        }
        return result
    }
}
