import CRdKafka

/// Kafka transactions (a producer created with a `transactionalID`).
///
/// All of these may block for up to their timeout: call them from a thread of their own (never
/// an event loop). librdkafka allows one transaction at a time per producer; errors say whether
/// the transaction must be aborted (``KafkaError/transactionRequiresAbort``), may be retried
/// (``KafkaError/isRetriable``) or whether the producer is unusable (``KafkaError/isFatal``, e.g.
/// fenced by a newer producer with the same `transactional.id`).
extension KafkaProducer {
    /// Registers the `transactional.id` with the transaction coordinator: fences any older
    /// producer with the same id and aborts (or completes) a transaction it left open. Once,
    /// before the first ``beginTransaction()``.
    public func initTransactions(timeoutMilliseconds: Int32) throws(KafkaError) {
        try transactionCall("init transactions") { rd_kafka_init_transactions($0, timeoutMilliseconds) }
    }

    /// Starts a transaction; every record produced until commit or abort belongs to it.
    public func beginTransaction() throws(KafkaError) {
        try transactionCall("begin transaction") { rd_kafka_begin_transaction($0) }
    }

    /// Adds consumed offsets to the current transaction: they are committed for the consumer's
    /// group if, and only if, the transaction commits. `groupMetadata` lets the group coordinator
    /// reject the commit of a member that is no longer part of the group's current generation
    /// (KIP-447 zombie fencing).
    /// - Parameter offsets: per partition, the next offset to consume (last processed + 1).
    public func sendOffsetsToTransaction(
        _ offsets: [(KafkaTopicPartition, nextOffset: Int64)],
        groupMetadata: KafkaConsumerGroupMetadata,
        timeoutMilliseconds: Int32
    ) throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        let list = RDKafkaTopicPartitionList(capacity: offsets.count)
        for (partition, nextOffset) in offsets {
            list.add(partition, offset: nextOffset)
        }
        try transactionCall("send offsets to transaction") { rk in
            groupMetadata.withPointer { rd_kafka_send_offsets_to_transaction(rk, list.pointer, $0, timeoutMilliseconds) }
        }
    }

    /// Flushes the transaction's records and commits it (records visible to `read_committed`
    /// readers, offsets committed).
    public func commitTransaction(timeoutMilliseconds: Int32) throws(KafkaError) {
        try transactionCall("commit transaction") { rd_kafka_commit_transaction($0, timeoutMilliseconds) }
    }

    /// Aborts the current transaction: its records are never shown to `read_committed` readers
    /// and its offsets are not committed. Records not yet delivered get a delivery report with
    /// an error.
    public func abortTransaction(timeoutMilliseconds: Int32) throws(KafkaError) {
        try transactionCall("abort transaction") { rd_kafka_abort_transaction($0, timeoutMilliseconds) }
    }

    private func transactionCall(_ action: String, _ body: (OpaquePointer) -> OpaquePointer?) throws(KafkaError) {
        guard let outcome = withOpenClient({ rk in body(rk).map { KafkaError(consuming: $0, context: action) } }) else {
            throw KafkaError.closed("Kafka producer")
        }
        if let error = outcome {
            throw error
        }
    }
}
