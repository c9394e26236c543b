#if canImport(Glibc)
import Glibc
#endif
import CRdKafka
import Observability

/// Reads topics and committed offsets outside any consumer group: for tests, the demo and tools.
public enum KafkaTopicReader {
    /// Reads `topic` from the beginning of every partition until `expectedCount` records were
    /// read or `timeoutMilliseconds` passed, whichever comes first; then, when
    /// `settleMilliseconds` is given, goes on reading for that long, so that late duplicates
    /// show up in the count instead of going unseen.
    ///
    /// Uses a standalone consumer (`assign`, no group membership, no commits).
    /// - Parameter isolation: `read_committed` (skip aborted and open transactions) or `read_uncommitted`.
    /// - Returns: the records read, per partition in offset order (fewer than expected on
    ///   timeout, more when duplicates or unexpected records arrived).
    /// - Throws: ``KafkaError`` when the topic's metadata cannot be read in time.
    public static func readAll(
        bootstrapServers: String,
        topic: String,
        expectedCount: Int,
        timeoutMilliseconds: Int,
        settleMilliseconds: Int = 0,
        isolation: String = "read_committed"
    ) throws -> [KafkaMessage] {
        let start = Timestamp.monotonicNanoseconds()
        let expectedBy = start + UInt64(max(timeoutMilliseconds, 0)) * 1_000_000
        var settledBy: UInt64?
        return try read(
            bootstrapServers: bootstrapServers, topic: topic,
            timeoutMilliseconds: max(timeoutMilliseconds, 0) + max(settleMilliseconds, 0), isolation: isolation
        ) { messages, _ in
            let now = Timestamp.monotonicNanoseconds()
            guard messages.count >= expectedCount else { return now >= expectedBy }
            if settledBy == nil { settledBy = now + UInt64(max(settleMilliseconds, 0)) * 1_000_000 }
            return now >= settledBy!  // invariant: set on the line above
        }
    }

    /// Reads `topic` from the beginning of every partition up to the end it has when the read
    /// starts (each partition's high watermark), or until `timeoutMilliseconds` passed. For a
    /// settled topic (nothing is written to it any more) this is everything it holds, late
    /// duplicates included, without waiting out a timeout.
    /// - Returns: the records read, per partition in offset order.
    /// - Throws: ``KafkaError`` when the topic's metadata or watermarks cannot be read in time,
    ///   or (`_TIMED_OUT`) when the end was not reached in time: what was read is then not
    ///   everything, and a caller counting records must not take it for everything.
    public static func readToEnd(
        bootstrapServers: String, topic: String, timeoutMilliseconds: Int, isolation: String = "read_committed"
    ) throws -> [KafkaMessage] {
        var ends: [Int32: Int64] = [:]
        var endsKnown = false
        var reachedEnd = false
        let messages = try read(bootstrapServers: bootstrapServers, topic: topic, timeoutMilliseconds: timeoutMilliseconds,
                                isolation: isolation) { _, client in
            if !endsKnown {
                ends = try highWatermarks(of: topic, client: client)
                endsKnown = true
            }
            // The position passes transaction markers and aborted records too.
            let list = RDKafkaTopicPartitionList(ends.keys.map { KafkaTopicPartition(topic: topic, partition: $0) })
            guard rd_kafka_position(client.pointer, list.pointer) == RD_KAFKA_RESP_ERR_NO_ERROR else { return false }
            reachedEnd = RDKafkaTopicPartitionList.entries(of: list.pointer).allSatisfy { entry in
                entry.offset >= ends[entry.partition.partition, default: 0]
            }
            return reachedEnd
        }
        guard reachedEnd else {
            throw KafkaError(RD_KAFKA_RESP_ERR__TIMED_OUT, context: "reading \(topic) to its end (\(messages.count) records read)")
        }
        return messages
    }

    /// Reads `topic` from the beginning with a standalone consumer until `isDone` says so or the
    /// timeout passes (`isDone` is asked before each poll).
    private static func read(
        bootstrapServers: String, topic: String, timeoutMilliseconds: Int, isolation: String,
        isDone: ([KafkaMessage], RDKafkaClient) throws -> Bool
    ) throws -> [KafkaMessage] {
        let deadline = Timestamp.monotonicNanoseconds() + UInt64(max(timeoutMilliseconds, 0)) * 1_000_000
        let client = try makeStandaloneClient(
            bootstrapServers: bootstrapServers, groupID: "apns-bridge-reader-\(UInt64.random(in: 1...UInt64.max))",
            extra: [("isolation.level", isolation), ("auto.offset.reset", "earliest")])
        defer { closeStandaloneClient(client) }

        let partitionCount = try partitionCount(of: topic, client: client, deadline: deadline)
        let assignment = RDKafkaTopicPartitionList(
            (0..<partitionCount).map { KafkaTopicPartition(topic: topic, partition: $0) },
            offset: apnsb_rd_kafka_offset_beginning())
        let assigned = rd_kafka_assign(client.pointer, assignment.pointer)
        guard assigned == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(assigned, context: "assign \(topic)") }

        var messages: [KafkaMessage] = []
        var topicNames = TopicNameCache()
        while try !isDone(messages, client) {
            let now = Timestamp.monotonicNanoseconds()
            guard now < deadline else { break }
            let wait = Int32(min((deadline - now) / 1_000_000, 100))
            guard let message = rd_kafka_consumer_poll(client.pointer, wait) else { continue }
            defer { rd_kafka_message_destroy(message) }
            guard message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
            messages.append(KafkaMessage(message, topic: topicNames.name(of: message)))
        }
        return messages
    }

    /// The high watermark (the offset the next record will get) of every partition of `topic`
    /// that holds records.
    private static func highWatermarks(of topic: String, client: RDKafkaClient) throws -> [Int32: Int64] {
        let count = try partitionCount(of: topic, client: client, deadline: Timestamp.monotonicNanoseconds() + 10_000_000_000)
        var ends: [Int32: Int64] = [:]
        for partition in 0..<count {
            var low: Int64 = 0
            var high: Int64 = 0
            let result = rd_kafka_query_watermark_offsets(client.pointer, topic, partition, &low, &high, 10_000)
            guard result == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(result, context: "watermarks of \(topic)/\(partition)")
            }
            // An empty partition (nothing written, or everything deleted) is read to its end
            // already: its position would stay unset and never reach `high`.
            if high > low { ends[partition] = high }
        }
        return ends
    }

    /// The offsets `groupID` has committed for partitions `0..<partitions` of `topic`
    /// (`rd_kafka_committed`); partitions without a committed offset are absent.
    /// - Throws: ``KafkaError`` when the group coordinator does not answer within 10 seconds, or
    ///   when any partition's answer carries an error: "absent" must mean "nothing committed",
    ///   never "could not be read".
    public static func committedOffsets(
        bootstrapServers: String, groupID: String, topic: String, partitions: Int32
    ) throws -> [Int32: Int64] {
        let client = try makeStandaloneClient(bootstrapServers: bootstrapServers, groupID: groupID, extra: [])
        defer { closeStandaloneClient(client) }
        let list = RDKafkaTopicPartitionList((0..<partitions).map { KafkaTopicPartition(topic: topic, partition: $0) })
        let result = rd_kafka_committed(client.pointer, list.pointer, 10_000)
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(result, context: "read committed offsets of \(groupID)")
        }
        var offsets: [Int32: Int64] = [:]
        for entry in RDKafkaTopicPartitionList.entries(of: list.pointer) {
            guard entry.error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(entry.error, context: "committed offset of \(groupID) for \(entry.partition)")
            }
            if entry.offset >= 0 {
                offsets[entry.partition.partition] = entry.offset
            }
        }
        return offsets
    }

    /// A consumer handle that never joins the group and never commits.
    private static func makeStandaloneClient(
        bootstrapServers: String, groupID: String, extra: [(name: String, value: String)]
    ) throws -> RDKafkaClient {
        let properties: [(name: String, value: String)] = [
            ("bootstrap.servers", bootstrapServers),
            ("group.id", groupID),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("enable.partition.eof", "false"),
        ]
        return try RDKafkaClient(
            kind: .consumer, properties: properties + extra,
            context: RDKafkaClientContext(logger: Logger(label: "kafka.reader")))
    }

    private static func closeStandaloneClient(_ client: RDKafkaClient) {
        _ = rd_kafka_consumer_close(client.pointer)
        client.destroy()
    }

    /// The partition count from the topic's metadata, retried until `deadline`.
    private static func partitionCount(of topic: String, client: RDKafkaClient, deadline: UInt64) throws -> Int32 {
        var lastError = KafkaError(RD_KAFKA_RESP_ERR__TIMED_OUT, context: "metadata of \(topic)")
        while true {
            let now = Timestamp.monotonicNanoseconds()
            guard now < deadline else { throw lastError }
            let wait = Int32(clamping: max((deadline - now) / 1_000_000, 1))
            var metadata: UnsafePointer<rd_kafka_metadata>?
            let result = rd_kafka_metadata(client.pointer, 1, nil, &metadata, min(wait, 2000))
            if result == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata {
                defer { rd_kafka_metadata_destroy(metadata) }
                let topics = UnsafeBufferPointer(start: metadata.pointee.topics, count: Int(metadata.pointee.topic_cnt))
                if let found = topics.first(where: { $0.topic.map { String(cString: $0) } == topic }),
                    found.err == RD_KAFKA_RESP_ERR_NO_ERROR, found.partition_cnt > 0
                {
                    return Int32(found.partition_cnt)
                }
                lastError = KafkaError(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, context: "metadata of \(topic)")
            } else {
                lastError = KafkaError(result, context: "metadata of \(topic)")
            }
            usleep(50_000)
        }
    }
}
