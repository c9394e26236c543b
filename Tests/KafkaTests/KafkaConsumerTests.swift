import Foundation
import Kafka
import Observability
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct KafkaConsumerTests {
    @Test func groupMemberReceivesEveryRecordWithHeadersAndTimestamps() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("requests", partitions: 3)
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: KafkaTestSupport.logger,
            deliveryHandler: { _, _ in })
        defer { producer.close() }
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let count = 600
        // A name that is not UTF-8 ("caf" and Latin-1's é).
        let latinName = (Array("caf".utf8) + [0xE9]).withUnsafeBytes { KafkaHeader(nameBytes: $0, value: [7]) }
        for index in 0..<count {
            try producer.produce(
                topic: "requests", key: index % 10 == 0 ? nil : Array("key-\(index)".utf8),
                value: Array("value-\(index)".utf8),
                headers: [KafkaHeader(name: "request-id", value: Array("r\(index)".utf8)), KafkaHeader(name: "empty", value: []),
                          KafkaHeader(name: "null", value: nil), latinName],
                tag: UInt64(index))
        }
        #expect(producer.flush(timeoutMilliseconds: 10_000))
        let after = Int64(Date().timeIntervalSince1970 * 1000)

        let consumer = try KafkaConsumer(
            bootstrapServers: cluster.bootstrapServers, groupID: "readers", topics: ["requests"],
            properties: KafkaTestSupport.fastGroupProperties, logger: KafkaTestSupport.logger)
        defer { consumer.close() }
        let messages = try KafkaTestSupport.consume(consumer, count: count, seconds: 30)
        #expect(messages.count == count)

        for message in messages {
            let value = try #require(message.value)
            let index = try #require(Int(String(decoding: value, as: UTF8.self).dropFirst(6)))
            #expect(message.topic == "requests")
            #expect(message.key == (index % 10 == 0 ? nil : Array("key-\(index)".utf8)))
            #expect(message.headers.map(\.name) == ["request-id", "empty", "null", "caf\u{FFFD}"])
            // The name that is not UTF-8 keeps its bytes.
            #expect(message.headers.map(\.rawName) == [nil, nil, nil, Array("caf".utf8) + [0xE9]])
            #expect(message.header("request-id") == Array("r\(index)".utf8))
            // An empty value and a null one arrive as they were produced.
            #expect(message.headers.map(\.value) == [Array("r\(index)".utf8), [], nil, [7]])
            let timestamp = try #require(message.timestampMilliseconds)
            #expect(timestamp >= before - 1 && timestamp <= after + 1)
        }
        #expect(Set(messages.map { "\($0.partition)/\($0.offset)" }).count == count)
        var lastOffset: [Int32: Int64] = [:]
        for message in messages {
            #expect(message.offset > lastOffset[message.partition, default: -1])
            lastOffset[message.partition] = message.offset
        }
    }

    /// The borrowed form: each record's fields as librdkafka holds them, and a copy with key and
    /// headers (read only then) equal to what the copying poll returns.
    @Test func polledRecordsHoldWhatTheirCopiesHold() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("requests", partitions: 2)
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: KafkaTestSupport.logger,
            deliveryHandler: { _, _ in })
        defer { producer.close() }
        let count = 300
        for index in 0..<count {
            // Every third record has no headers, every fifth a null value, every seventh a null key.
            try producer.produce(
                topic: "requests", key: index % 7 == 0 ? nil : Array("key-\(index)".utf8),
                value: index % 5 == 0 ? nil : Array("value-\(index)".utf8),
                headers: index % 3 == 0 ? [] : [KafkaHeader(name: "request-id", value: Array("r\(index)".utf8))],
                tag: UInt64(index))
        }
        #expect(producer.flush(timeoutMilliseconds: 10_000))

        let consumer = try KafkaConsumer(
            bootstrapServers: cluster.bootstrapServers, groupID: "borrowers", topics: ["requests"],
            properties: KafkaTestSupport.fastGroupProperties, logger: KafkaTestSupport.logger)
        defer { consumer.close() }
        var copies: [KafkaMessage] = []
        var handedOut = 0
        let deadline = Date().addingTimeInterval(30)
        while copies.count < count, Date() < deadline {
            handedOut += try consumer.poll(maxMessages: 50, timeoutMilliseconds: 100) { record in
                let copy = record.message()
                #expect(record.topic == "requests" && copy.topic == "requests")
                #expect(record.partition == copy.partition && record.offset == copy.offset)
                #expect(record.topicPartition == KafkaTopicPartition(topic: "requests", partition: copy.partition))
                #expect(record.timestampMilliseconds != nil && record.timestampMilliseconds == copy.timestampMilliseconds)
                #expect(record.value.map { Array($0) } == copy.value)
                copies.append(copy)
            }
        }
        #expect(copies.count == count && handedOut == count)
        var identified = Set<Int>()
        for copy in copies {
            // Indexes 0, 105 and 210 carry none of the three; every other record names its index.
            guard let index = Self.index(of: copy) else { continue }
            identified.insert(index)
            #expect(copy.key == (index % 7 == 0 ? nil : Array("key-\(index)".utf8)))
            #expect(copy.value == (index % 5 == 0 ? nil : Array("value-\(index)".utf8)))
            #expect(copy.headers.map(\.name) == (index % 3 == 0 ? [] : ["request-id"]))
            #expect(copy.header("request-id") == (index % 3 == 0 ? nil : Array("r\(index)".utf8)))
        }
        #expect(identified.count == count - 3)
    }

    /// The index a record of `polledRecordsHoldWhatTheirCopiesHold` carries in its key, value or header.
    private static func index(of message: KafkaMessage) -> Int? {
        if let key = message.key { return Int(String(decoding: key.dropFirst(4), as: UTF8.self)) }
        if let value = message.value { return Int(String(decoding: value.dropFirst(6), as: UTF8.self)) }
        if let header = message.header("request-id") { return Int(String(decoding: header.dropFirst(), as: UTF8.self)) }
        return nil
    }

    @Test func onlyStoredOffsetsAreCommitted() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try KafkaTestSupport.createFilledTopic("work", partitions: 2, count: 40, on: cluster)

        let consumer = try KafkaTestSupport.groupConsumer(of: "work", groupID: "workers", on: cluster)
        let messages = try KafkaTestSupport.consume(consumer, count: 40, seconds: 30)
        #expect(messages.count == 40)
        let partitionZero = messages.filter { $0.partition == 0 }
        let partitionOne = messages.filter { $0.partition == 1 }
        try #require(partitionZero.count >= 2 && !partitionOne.isEmpty)

        // Partition 0: everything but its last record processed. Partition 1: nothing stored.
        let processedThrough = partitionZero[partitionZero.count - 2].offset
        let zero = KafkaTopicPartition(topic: "work", partition: 0)
        try consumer.storeOffsets([(zero, nextOffset: processedThrough + 1)])
        try consumer.commitSync()
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: cluster.bootstrapServers, groupID: "workers", topic: "work", partitions: 2)
        #expect(committed == [0: processedThrough + 1])

        // close() commits what was stored since.
        try consumer.storeOffsets([(zero, nextOffset: partitionZero.last!.offset + 1)])
        consumer.close()
        let final = try KafkaTopicReader.committedOffsets(
            bootstrapServers: cluster.bootstrapServers, groupID: "workers", topic: "work", partitions: 2)
        #expect(final == [0: partitionZero.last!.offset + 1])
        #expect(throws: KafkaError.self) { try consumer.poll(maxMessages: 1, timeoutMilliseconds: 0) }
        consumer.close()  // idempotent
    }

    /// Records fetched but not polled yet when the close's time is up reach librdkafka's close
    /// queue: the close goes on on a thread of its own and drops them (they stay uncommitted),
    /// where serving them without a consume callback aborted the process.
    @Test func aCloseOutOfTimeWithFetchedRecordsFinishesInTheBackground() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try KafkaTestSupport.createFilledTopic("backlog", partitions: 4, count: 2_000, on: cluster)

        let consumer = try KafkaConsumer(
            bootstrapServers: cluster.bootstrapServers, groupID: "closing", topics: ["backlog"],
            properties: KafkaTestSupport.fastGroupProperties, logger: KafkaTestSupport.logger)
        // One record polled: the rest of its partition's fetch waits in the consumer's queue.
        var first: [KafkaMessage] = []
        #expect(waitFor(timeout: .seconds(30)) {
            first = (try? consumer.poll(maxMessages: 1, timeoutMilliseconds: 100)) ?? []
            return !first.isEmpty
        })
        consumer.close(timeoutMilliseconds: 0)
        #expect(waitFor(timeout: .seconds(30)) { !consumer.isClosingInBackground })
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: cluster.bootstrapServers, groupID: "closing", topic: "backlog", partitions: 4)
        #expect(committed.isEmpty, "nothing was stored, so nothing is committed: \(committed)")
    }

    /// A watermark request in progress when the consumer closes is waited for, and answered:
    /// the handle it uses is destroyed only after it returns.
    @Test func aCloseWaitsForAWatermarkRequestInProgress() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try KafkaTestSupport.createFilledTopic("marks", partitions: 1, count: 10, on: cluster)
        let consumer = try KafkaTestSupport.groupConsumer(of: "marks", groupID: "marks", on: cluster)
        let partition = KafkaTopicPartition(topic: "marks", partition: 0)
        #expect(waitFor(timeout: .seconds(10)) {
            consumer.watermarks(of: [partition], timeoutMilliseconds: 1_000)[partition]?.high == 10
        })
        // The next two ListOffsets requests (the low and the high watermark) are answered late.
        let listOffsets: Int16 = 2
        cluster.pushBrokerRequestErrors(broker: 1, apiKey: listOffsets, errors: [0, 0], rttMilliseconds: 1_000)
        let answered = Locked<Int64?>(nil)
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            if worker == 0 {
                let high = consumer.watermarks(of: [partition], timeoutMilliseconds: 10_000)[partition]?.high
                answered.withLock { $0 = high }
            } else {
                // Closed once the broker holds the first request.
                #expect(waitFor(timeout: .seconds(10)) {
                    cluster.pendingRequestErrors(broker: 1, apiKey: listOffsets).map { $0 < 2 } ?? false
                })
                consumer.close()
                #expect(answered.withLock { $0 } == 10, "the close returned before the request in progress was answered")
            }
        }
        #expect(consumer.watermarks(of: [partition], timeoutMilliseconds: 1_000).isEmpty)
    }

    /// A consumer whose offsets go into transactions must never commit on its own: a stored
    /// offset stays uncommitted with `autoCommit: false`, while the same store is committed by
    /// the timer of a consumer with it.
    @Test func withoutAutoCommitAStoredOffsetIsCommittedOnlyWhenAsked() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try KafkaTestSupport.createFilledTopic("txn-input", partitions: 1, count: 10, on: cluster)
        let partition = KafkaTopicPartition(topic: "txn-input", partition: 0)
        var properties = KafkaTestSupport.fastGroupProperties
        properties["auto.commit.interval.ms"] = "100"
        func committed(_ group: String) throws -> Int64? {
            try KafkaTopicReader.committedOffsets(
                bootstrapServers: cluster.bootstrapServers, groupID: group, topic: "txn-input", partitions: 1)[0]
        }
        var consumers: [KafkaConsumer] = []
        defer { consumers.forEach { $0.close() } }
        for (group, autoCommit) in [("manual", false), ("timer", true)] {
            let consumer = try KafkaConsumer(
                bootstrapServers: cluster.bootstrapServers, groupID: group, topics: ["txn-input"],
                properties: properties, logger: KafkaTestSupport.logger, autoCommit: autoCommit)
            consumers.append(consumer)
            #expect(try KafkaTestSupport.consume(consumer, count: 10, seconds: 30).count == 10)
            try consumer.storeOffsets([(partition, nextOffset: 7)])
        }
        // The timer's consumer keeps polling until its commit is seen; the other one polls as long.
        var timerCommitted = false
        for _ in 0..<300 where !timerCommitted {
            for consumer in consumers { _ = try consumer.poll(maxMessages: 1, timeoutMilliseconds: 20) }
            timerCommitted = try committed("timer") == 7
        }
        #expect(timerCommitted)
        #expect(try committed("manual") == nil)
        try consumers[0].commitSync([(partition, nextOffset: 7)])
        #expect(try committed("manual") == 7)
    }

    /// A commit waited for with a deadline gives up when its answer does not come by then (here
    /// held back 5 s by the broker), where librdkafka's own synchronous commit would wait for
    /// it; the broker took the commit when it arrived, and the next commit is answered again.
    @Test func aCommitWaitedForWithADeadlineGivesUpWhenItsAnswerIsLate() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try KafkaTestSupport.createFilledTopic("late", partitions: 1, count: 10, on: cluster)
        let consumer = try KafkaTestSupport.groupConsumer(of: "late", groupID: "late-answers", on: cluster)
        defer { consumer.close() }
        #expect(try KafkaTestSupport.consume(consumer, count: 10, seconds: 30).count == 10)
        let partition = KafkaTopicPartition(topic: "late", partition: 0)
        cluster.pushBrokerRequestErrors(broker: 1, apiKey: MockKafkaCluster.APIKey.offsetCommit, errors: [0], rttMilliseconds: 5_000)

        let started = ContinuousClock.now
        let error = #expect(throws: KafkaError.self) {
            try consumer.commitSync([(partition, nextOffset: 4)], until: Timestamp.monotonicNanoseconds() + 300_000_000)
        }
        #expect(error?.code == KafkaError.Code.answerNotAwaited)
        #expect(ContinuousClock.now - started < .seconds(4))
        #expect(try KafkaTopicReader.committedOffsets(
            bootstrapServers: cluster.bootstrapServers, groupID: "late-answers", topic: "late", partitions: 1) == [0: 4])

        try consumer.storeOffsets([(partition, nextOffset: 9)])
        try consumer.commitSync()
        #expect(try KafkaTopicReader.committedOffsets(
            bootstrapServers: cluster.bootstrapServers, groupID: "late-answers", topic: "late", partitions: 1) == [0: 9])
    }

    @Test func storingOffsetsOfAnUnassignedPartitionFails() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("assigned", partitions: 1)
        let consumer = try KafkaConsumer(
            bootstrapServers: cluster.bootstrapServers, groupID: "g", topics: ["assigned"],
            properties: KafkaTestSupport.fastGroupProperties, logger: KafkaTestSupport.logger)
        defer { consumer.close() }
        #expect(try KafkaTestSupport.poll([consumer], seconds: 20) { try consumer.assignment().count == 1 })
        let error = #expect(throws: KafkaError.self) {
            try consumer.storeOffsets([(KafkaTopicPartition(topic: "other", partition: 0), nextOffset: 5)])
        }
        #expect(error?.message.contains("other/0") == true)
    }

    @Test func pauseStopsDeliveryAndResumeRestartsIt() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("pausable", partitions: 2)
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: KafkaTestSupport.logger,
            deliveryHandler: { _, _ in })
        defer { producer.close() }
        let consumer = try KafkaConsumer(
            bootstrapServers: cluster.bootstrapServers, groupID: "pausers", topics: ["pausable"],
            properties: KafkaTestSupport.fastGroupProperties, logger: KafkaTestSupport.logger)
        defer { consumer.close() }

        try KafkaTestSupport.produce(producer, topic: "pausable", count: 10)
        #expect(producer.flush(timeoutMilliseconds: 10_000))
        #expect(try KafkaTestSupport.consume(consumer, count: 10, seconds: 30).count == 10)

        let assigned = try consumer.assignment()
        #expect(assigned.count == 2)
        try consumer.pause(assigned)
        try KafkaTestSupport.produce(producer, topic: "pausable", count: 10, first: 10)
        #expect(producer.flush(timeoutMilliseconds: 10_000))
        #expect(try KafkaTestSupport.consume(consumer, count: 1, seconds: 1.5).isEmpty)

        try consumer.resume(assigned)
        let resumed = try KafkaTestSupport.consume(consumer, count: 10, seconds: 10)
        #expect(resumed.count == 10)
        #expect(Set(resumed.compactMap(\.value)) == Set((10..<20).map { Array("value-\($0)".utf8) }))
    }

    /// A pause made in the rebalance handler as partitions are assigned holds from their first
    /// fetch: the records already in the paused partitions stay there while the other partitions
    /// deliver every record they hold, and come once the partitions are resumed. (Made after the
    /// assign, the pause raced librdkafka's fetch start and was now and then dropped.)
    @Test func aPauseMadeAsPartitionsAreAssignedHoldsFromTheFirstFetch() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        let topic = "paused-at-assign"
        try KafkaTestSupport.createFilledTopic(topic, partitions: 4, count: 200, on: cluster)
        let consumer = try KafkaTestSupport.groupConsumer(of: topic, groupID: "pausers-at-assign", on: cluster)
        defer { consumer.close() }
        let held = [0, 1].map { KafkaTopicPartition(topic: topic, partition: $0) }
        let fetching = [2, 3].map { KafkaTopicPartition(topic: topic, partition: $0) }
        let pauseFailures = Locked<[String]>([])
        let assignedBeforeTheHandler = Locked<[KafkaTopicPartition]>([])
        consumer.rebalanceHandler = { [weak consumer] event in
            guard case .assigned(let assigned) = event, let consumer else { return }
            // Told before librdkafka assigns them (a pause made after the assign raced the fetch start).
            let current = (try? consumer.assignment()) ?? []
            assignedBeforeTheHandler.withLock { $0 += assigned.filter { current.contains($0) } }
            do {
                try consumer.pause(assigned.filter { held.contains($0) })
            } catch {
                pauseFailures.withLock { $0.append("\(error)") }
            }
        }
        let ends = consumer.watermarks(of: held + fetching, timeoutMilliseconds: 10_000)
        #expect(held.allSatisfy { (ends[$0]?.high ?? 0) > 0 }, "every paused partition holds records")
        let fetchable = fetching.reduce(0) { $0 + Int(ends[$1]?.high ?? 0) }

        var received: [KafkaMessage] = []
        let deadline = Date().addingTimeInterval(30)
        while received.count < fetchable, Date() < deadline {
            received += try consumer.poll(maxMessages: 500, timeoutMilliseconds: 100)
        }
        #expect(received.count == fetchable)
        #expect(received.allSatisfy { $0.partition >= 2 }, "nothing from a partition paused as it was assigned")
        #expect(pauseFailures.withLock { $0 }.isEmpty)
        #expect(assignedBeforeTheHandler.withLock { $0 }.isEmpty)

        try consumer.resume(held)
        received += try KafkaTestSupport.consume(consumer, count: 200 - received.count, seconds: 20)
        #expect(Set(received.compactMap(\.value)) == Set((0..<200).map { Array("value-\($0)".utf8) }))
    }
}
