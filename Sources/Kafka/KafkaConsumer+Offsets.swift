import CRdKafka
import Synchronization
import Observability

extension KafkaConsumer {
    /// Stores the offsets to commit next: `nextOffset` is the last processed offset + 1.
    /// librdkafka commits them with the next auto-commit, ``commitSync()`` or ``close()``.
    ///
    /// Any thread. Offsets of partitions that are still assigned are stored even when others fail.
    /// - Throws: ``KafkaError`` listing the partitions that could not be stored (e.g. no longer
    ///   assigned), or when the consumer is closed.
    public func storeOffsets(_ offsets: [(KafkaTopicPartition, nextOffset: Int64)]) throws {
        guard !offsets.isEmpty else { return }
        let list = RDKafkaTopicPartitionList(capacity: offsets.count)
        for (partition, nextOffset) in offsets {
            list.add(partition, offset: nextOffset)
        }
        try withOpenHandle { rk throws(KafkaError) in
            let result = rd_kafka_offsets_store(rk, list.pointer)
            if result != RD_KAFKA_RESP_ERR_NO_ERROR, result != RD_KAFKA_RESP_ERR__STATE,
                result != RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION
            {
                throw KafkaError(result, context: "store offsets")
            }
        }
        if let failure = KafkaConsumer.partitionFailures(list.pointer, action: "store offsets") {
            throw failure
        }
    }

    /// Commits the stored offsets now and waits for the broker's answer (polling thread), until
    /// `deadline` (``Timestamp/monotonicNanoseconds()``) at most. Having nothing new to commit is
    /// not an error.
    /// - Throws: ``KafkaError`` when the commit fails, when the deadline passes first
    ///   (``KafkaError/Code/answerNotAwaited``; librdkafka's commit goes on, its answer unread),
    ///   or when the consumer is closed.
    public func commitSync(until deadline: UInt64 = .max) throws {
        guard phase.withLock({ $0 == .open }) else { throw KafkaError.closed("Kafka consumer") }
        let result = commitWaiting(nil, until: deadline)
        guard result.code == RD_KAFKA_RESP_ERR_NO_ERROR || result.code == RD_KAFKA_RESP_ERR__NO_OFFSET else {
            throw result.partitionFailures ?? KafkaError(result.code, context: "commit offsets")
        }
    }

    /// Commits exactly these offsets now and waits for the broker's answer (polling thread, also
    /// from inside the rebalance handler), until `deadline` at most.
    /// - Throws: ``KafkaError`` when the commit fails, also for single partitions (named), or
    ///   when the deadline passes first (``KafkaError/Code/answerNotAwaited``).
    public func commitSync(_ offsets: [(KafkaTopicPartition, nextOffset: Int64)], until deadline: UInt64 = .max) throws {
        guard !offsets.isEmpty else { return }
        guard phase.withLock({ $0 == .open }) else { throw KafkaError.closed("Kafka consumer") }
        let list = RDKafkaTopicPartitionList(capacity: offsets.count)
        for (partition, nextOffset) in offsets {
            list.add(partition, offset: nextOffset)
        }
        let result = commitWaiting(list, until: deadline)
        // librdkafka sets the answer's error to a failed partition's: the partitions say which.
        if let failure = result.partitionFailures {
            throw failure
        }
        guard result.code == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(result.code, context: "commit offsets")
        }
    }

    /// Starts a commit of `offsets` (nil: the stored offsets) and waits for its answer until
    /// `deadline`: librdkafka's own synchronous commit waits as long as the group coordinator
    /// takes (up to `session.timeout.ms` for one to be found), more than a rebalance callback or
    /// a stop can give. Past the deadline the commit goes on inside librdkafka and its answer is
    /// dropped with the queue.
    /// - Returns: the commit's error (`_TIMED_OUT_QUEUE`, ``KafkaError/Code/answerNotAwaited``,
    ///   when the deadline came first) and the partitions the broker refused.
    func commitWaiting(_ offsets: RDKafkaTopicPartitionList?, until deadline: UInt64)
        -> (code: rd_kafka_resp_err_t, partitionFailures: KafkaError?)
    {
        guard let queue = rd_kafka_queue_new(client.pointer) else { return (RD_KAFKA_RESP_ERR__FAIL, nil) }
        defer { rd_kafka_queue_destroy(queue) }
        let started = rd_kafka_commit_queue(client.pointer, offsets?.pointer, queue, nil, nil)
        guard started == RD_KAFKA_RESP_ERR_NO_ERROR else { return (started, nil) }
        while true {
            let now = Timestamp.monotonicNanoseconds()
            guard deadline > now else { return (RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE, nil) }
            let waitMilliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 100))
            guard let event = rd_kafka_queue_poll(queue, waitMilliseconds) else { continue }
            defer { rd_kafka_event_destroy(event) }
            guard rd_kafka_event_type(event) == RD_KAFKA_EVENT_OFFSET_COMMIT else { continue }
            let failures = rd_kafka_event_topic_partition_list(event).flatMap { list in
                KafkaConsumer.partitionFailures(list, action: "commit offsets")
            }
            return (rd_kafka_event_error(event), failures)
        }
    }

    /// The low and high watermarks of each partition (the offsets of its first record and of the
    /// record after its last), asked of the partition leaders now. librdkafka's own figures
    /// (statistics, cached watermarks) come from fetch responses and stand still for a paused
    /// partition; these do not.
    ///
    /// Blocks for up to `timeoutMilliseconds` per partition; any thread. `close` waits for the
    /// partition being asked about, and no other is asked once it has started.
    /// - Returns: the partitions that were answered (none when the consumer is closing).
    public func watermarks(of partitions: [KafkaTopicPartition],
                           timeoutMilliseconds: Int32) -> [KafkaTopicPartition: (low: Int64, high: Int64)] {
        var answered: [KafkaTopicPartition: (low: Int64, high: Int64)] = [:]
        for partition in partitions {
            let started = phase.withLock { phase -> Bool in
                guard phase == .open else { return false }
                blockingCalls.add(1, ordering: .relaxed)
                return true
            }
            guard started else { break }
            var low: Int64 = -1
            var high: Int64 = -1
            let result = rd_kafka_query_watermark_offsets(client.pointer, partition.topic, partition.partition,
                                                          &low, &high, timeoutMilliseconds)
            blockingCalls.subtract(1, ordering: .releasing)
            if result == RD_KAFKA_RESP_ERR_NO_ERROR, low >= 0, high >= low {
                answered[partition] = (low, high)
            }
        }
        return answered
    }

    /// Runs `body` with the handle unless the consumer is closed, holding the phase lock so
    /// `close` waits for it. For non-blocking librdkafka calls only.
    func withOpenHandle<R>(_ body: (OpaquePointer) throws(KafkaError) -> R) throws(KafkaError) -> R {
        try phase.withLock { phase throws(KafkaError) -> R in
            guard phase != .closed else { throw KafkaError.closed("Kafka consumer") }
            return try body(client.pointer)
        }
    }

    /// One error naming every entry of `list` whose `.err` is set, or nil.
    static func partitionFailures(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>, action: String) -> KafkaError? {
        let failed = RDKafkaTopicPartitionList.entries(of: list).filter { $0.error != RD_KAFKA_RESP_ERR_NO_ERROR }
        guard let first = failed.first else { return nil }
        let details = failed.map { "\($0.partition) (\(String(cString: rd_kafka_err2str($0.error))))" }
        return KafkaError(
            code: first.error.rawValue,
            message: "\(action) failed for \(details.joined(separator: ", "))",
            isFatal: false,
            isRetriable: KafkaError.isRetriableCode(first.error))
    }
}
