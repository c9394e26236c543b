import CRdKafka

extension KafkaConsumer {
    /// Stops fetching from `partitions` (already fetched records of them are dropped, and are
    /// fetched again after ``resume(_:)``). Any thread; keep polling while paused.
    /// - Throws: ``KafkaError`` naming partitions that are not assigned, or when closed.
    public func pause(_ partitions: [KafkaTopicPartition]) throws {
        try pauseOrResume(partitions, pause: true)
    }

    /// Restarts fetching from `partitions` where consumption stopped. Any thread.
    /// - Throws: ``KafkaError`` naming partitions that are not assigned, or when closed.
    public func resume(_ partitions: [KafkaTopicPartition]) throws {
        try pauseOrResume(partitions, pause: false)
    }

    /// The partitions currently assigned to this member. Any thread.
    public func assignment() throws -> [KafkaTopicPartition] {
        try withOpenHandle { rk throws(KafkaError) in
            var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
            let result = rd_kafka_assignment(rk, &list)
            defer { list.map { rd_kafka_topic_partition_list_destroy($0) } }
            guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "assignment") }
            return RDKafkaTopicPartitionList.partitions(of: list)
        }
    }

    private func pauseOrResume(_ partitions: [KafkaTopicPartition], pause: Bool) throws {
        guard !partitions.isEmpty else { return }
        let list = RDKafkaTopicPartitionList(partitions)
        let action = pause ? "pause" : "resume"
        try withOpenHandle { rk throws(KafkaError) in
            let result = pause ? rd_kafka_pause_partitions(rk, list.pointer) : rd_kafka_resume_partitions(rk, list.pointer)
            guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: action) }
        }
        if let failure = KafkaConsumer.partitionFailures(list.pointer, action: action) {
            throw failure
        }
    }
}
