import Foundation
import Kafka
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct KafkaProducerTests {
    /// `message.max.bytes` as librdkafka reads it (strtol: leading 0 octal, 0x hexadecimal):
    /// what decides whether a record fits is librdkafka's number, not the configuration's text.
    @Test func theLargestRecordIsWhatLibrdkafkaReadFromTheConfiguration() throws {
        let expected = [nil: 1_000_000, "600000": 600_000, "0500000": 163_840, "0x7A120": 500_000]
        for (text, bytes) in expected {
            let producer = try KafkaProducer(
                bootstrapServers: "127.0.0.1:9", properties: text.map { ["message.max.bytes": $0] } ?? [:],
                logger: KafkaTestSupport.logger, deliveryHandler: { _, _ in })
            #expect(producer.maximumRecordBytes == bytes, "message.max.bytes \(text ?? "not set")")
            producer.close(flushTimeoutMilliseconds: 0)
        }
    }

    /// librdkafka answers "queue full" to a record above the queue's byte bound even when the queue
    /// is empty, so a queue smaller than one record of `message.max.bytes` is refused at the start.
    @Test func aQueueSmallerThanTheLargestRecordIsRefused() throws {
        for (properties, refused) in [(["queue.buffering.max.kbytes": "512"], true),
                                      (["queue.buffering.max.kbytes": "977"], false),
                                      (["queue.buffering.max.kbytes": "512", "message.max.bytes": "524288"], false),
                                      (["queue.buffering.max.kbytes": "512", "message.max.bytes": "524289"], true)] {
            do {
                let producer = try KafkaProducer(bootstrapServers: "127.0.0.1:9", properties: properties,
                                                 logger: KafkaTestSupport.logger, deliveryHandler: { _, _ in })
                producer.close(flushTimeoutMilliseconds: 0)
                #expect(!refused, "\(properties)")
            } catch {
                #expect(refused, "\(properties): \(error)")
                #expect("\(error)".contains("queue.buffering.max.kbytes"), "\(error)")
            }
        }
    }

    /// A `message.max.bytes` below the largest record the caller must write is refused when the
    /// producer is made and by the offline check, as librdkafka reads the value ("040000" is
    /// octal: 16,384).
    @Test func aLargestRecordBelowTheCallersMinimumIsRefused() throws {
        for (text, refused) in [("16383", true), ("16384", false), ("040000", false), ("037777", true), ("1000", true)] {
            let properties = ["message.max.bytes": text]
            for offline in [false, true] {
                do {
                    if offline {
                        try KafkaProducer.checkSettings(properties: properties, queueCapacity: nil, transactionalID: nil,
                                                        minimumRecordBytes: 16_384)
                    } else {
                        let producer = try KafkaProducer(bootstrapServers: "127.0.0.1:9", properties: properties,
                                                         minimumRecordBytes: 16_384, logger: KafkaTestSupport.logger,
                                                         deliveryHandler: { _, _ in })
                        producer.close(flushTimeoutMilliseconds: 0)
                    }
                    #expect(!refused, "\(text), offline \(offline)")
                } catch {
                    #expect(refused, "\(text), offline \(offline): \(error)")
                    #expect("\(error)".contains("\"message.max.bytes\"") && "\(error)".contains("must be at least 16384"), "\(error)")
                }
            }
        }
    }

    @Test func everyMessageGetsOneDeliveryReportWithItsTag() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("deliveries", partitions: 4)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: KafkaTestSupport.logger,
            deliveryHandler: recorder.handler)
        defer { producer.close() }

        let count = 3000
        let tagBase: UInt64 = 0xABCD_0000_0000_0000  // high bits survive the trip through the opaque pointer
        try KafkaTestSupport.produce(producer, topic: "deliveries", count: count, tagBase: tagBase)
        try producer.produce(topic: "deliveries", key: nil, value: [], headers: [], tag: 0)
        #expect(producer.flush(timeoutMilliseconds: 20_000))
        #expect(recorder.wait(forCount: count + 1, seconds: 5))

        let reports = recorder.all
        #expect(reports.count == count + 1)
        #expect(reports.allSatisfy { $0.error == nil })
        let expected = Set((0..<UInt64(count)).map { tagBase + $0 }).union([0])
        #expect(Set(reports.map(\.tag)) == expected)

        let stored = try KafkaTopicReader.readAll(
            bootstrapServers: cluster.bootstrapServers, topic: "deliveries", expectedCount: count + 1,
            timeoutMilliseconds: 20_000, settleMilliseconds: 500)
        #expect(stored.count == count + 1)
        let byValue = Dictionary(stored.map { (String(decoding: $0.value ?? [], as: UTF8.self), $0) }, uniquingKeysWith: { a, _ in a })
        let sample = try #require(byValue["value-1234"])
        #expect(sample.key == Array("key-1234".utf8))
        #expect(sample.header("request-id") == Array("r1234".utf8))
        let empty = try #require(byValue[""])
        #expect(empty.key == nil)
        #expect(empty.value == [])  // empty, not null
        #expect(empty.headers.isEmpty)
    }

    /// The one-header form reads key, value and header value from the caller's memory during the
    /// call only: what arrives is what was there then, also when the memory is reused at once.
    /// Produced by topic name, and through the handle the producer keeps of an output topic.
    @Test(arguments: [false, true])
    func aRecordProducedFromBorrowedBytesArrivesWithItsKeyAndHeader(keepsTopicHandle: Bool) throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("borrowed", partitions: 1)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:],
            outputTopics: keepsTopicHandle ? ["other", "borrowed"] : [], logger: KafkaTestSupport.logger,
            deliveryHandler: recorder.handler)
        defer { producer.close() }

        var scratch = [UInt8](repeating: 0, count: 64)
        for index in 0..<3 {
            let id = Array("request-\(index)-\(String(repeating: "x", count: index * 20))".utf8)
            scratch.replaceSubrange(0..<id.count, with: id)
            let produced = scratch.withUnsafeBytes { bytes in
                let key = index == 2 ? nil : UnsafeRawBufferPointer(rebasing: bytes[0..<id.count])
                return producer.produceNow(topic: "borrowed", key: key, value: UnsafeRawBufferPointer(rebasing: bytes[0..<id.count]),
                                           header: (name: "request-id", value: UnsafeRawBufferPointer(rebasing: bytes[0..<id.count])),
                                           tag: UInt64(index))
            }
            #expect(produced)
            scratch.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xFF) }  // reused at once
        }
        #expect(recorder.wait(forCount: 3, seconds: 20))
        #expect(recorder.all.allSatisfy { $0.error == nil })

        let stored = try KafkaTopicReader.readAll(
            bootstrapServers: cluster.bootstrapServers, topic: "borrowed", expectedCount: 3, timeoutMilliseconds: 20_000,
            settleMilliseconds: 200)
        #expect(stored.count == 3)
        for (index, record) in stored.enumerated() {
            let id = Array("request-\(index)-\(String(repeating: "x", count: index * 20))".utf8)
            #expect(record.value == id)
            #expect(record.key == (index == 2 ? nil : id))
            #expect(record.headers.map(\.name) == ["request-id"])
            #expect(record.header("request-id") == id)
        }
    }

    @Test func messagesProducedWhileTheBrokerIsDownAreDeliveredAfterItComesBack() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("outage", partitions: 2)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: ["reconnect.backoff.max.ms": "200"],
            logger: KafkaTestSupport.logger, deliveryHandler: recorder.handler)
        defer { producer.close() }
        try KafkaTestSupport.produce(producer, topic: "outage", count: 1)
        #expect(producer.flush(timeoutMilliseconds: 10_000))

        cluster.setBrokerDown(1)
        try KafkaTestSupport.produce(producer, topic: "outage", count: 50, first: 1)
        // rd_kafka_outq_len also counts protocol requests waiting for the broker (metadata).
        #expect(producer.inFlightCount >= 50)
        #expect(recorder.all.count == 1)  // nothing reported while the broker is down
        cluster.setBrokerUp(1)

        #expect(producer.flush(timeoutMilliseconds: 20_000))
        let reports = recorder.all
        #expect(reports.count == 51)
        #expect(reports.allSatisfy { $0.error == nil })
        let stored = try KafkaTopicReader.readAll(
            bootstrapServers: cluster.bootstrapServers, topic: "outage", expectedCount: 51, timeoutMilliseconds: 10_000,
            settleMilliseconds: 500)
        #expect(Set(stored.compactMap(\.value)).count == 51)
        #expect(stored.count == 51)  // idempotence: retries wrote no duplicates
    }

    @Test func retriableProduceErrorsAreRetried() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("flaky", partitions: 1)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: ["retry.backoff.ms": "10"],
            logger: KafkaTestSupport.logger, deliveryHandler: recorder.handler)
        defer { producer.close() }
        try KafkaTestSupport.produce(producer, topic: "flaky", count: 1)
        #expect(producer.flush(timeoutMilliseconds: 10_000))

        cluster.pushRequestErrors(
            apiKey: MockKafkaCluster.APIKey.produce,
            errors: [KafkaError.Code.notEnoughReplicas, KafkaError.Code.notEnoughReplicas])
        try KafkaTestSupport.produce(producer, topic: "flaky", count: 10, first: 1)
        #expect(producer.flush(timeoutMilliseconds: 10_000))
        #expect(recorder.all.count == 11)
        #expect(recorder.all.allSatisfy { $0.error == nil })
    }

    @Test func closeReportsUndeliveredMessagesAsFailed() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("purged", partitions: 1)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: KafkaTestSupport.logger,
            deliveryHandler: recorder.handler)
        try KafkaTestSupport.produce(producer, topic: "purged", count: 1)
        #expect(producer.flush(timeoutMilliseconds: 10_000))
        cluster.setBrokerDown(1)
        try KafkaTestSupport.produce(producer, topic: "purged", count: 5, tagBase: 100)

        producer.close(flushTimeoutMilliseconds: 200)
        let failed = recorder.all.filter { $0.error != nil }
        #expect(Set(failed.map(\.tag)) == [100, 101, 102, 103, 104])
        #expect(throws: KafkaError.self) {
            try producer.produce(topic: "purged", key: nil, value: [1], headers: [], tag: 1)
        }
        producer.close()  // idempotent
    }

    @Test func enqueueNeverWaitsWhenTheQueueIsFullAndTheOutboxDeliversEverythingLater() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("outbox", partitions: 2)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: ["reconnect.backoff.max.ms": "200"],
            queueCapacity: (messages: 10, kilobytes: 1024), logger: KafkaTestSupport.logger,
            deliveryHandler: recorder.handler)
        defer { producer.close() }
        producer.enqueue(KafkaOutboundRecord(topic: "outbox", key: nil, value: Array("first".utf8), headers: [], tag: 0))
        #expect(waitFor { recorder.all.count == 1 })

        cluster.setBrokerDown(1)
        let count = 500
        for index in 1...count {
            // From this thread: each call only appends to the outbox, whatever librdkafka's state.
            producer.enqueue(KafkaOutboundRecord(
                topic: "outbox", key: Array("k\(index)".utf8), value: Array("v\(index)".utf8),
                headers: [KafkaHeader(name: "request-id", value: Array("r\(index)".utf8))], tag: UInt64(index)))
        }
        // librdkafka holds its 10; the rest wait in the outbox: backpressure, not a failure.
        // The outbox lets a record go once librdkafka refused the next one as "queue full".
        #expect(waitFor { producer.inFlightCount == 10 && producer.outboxCount == count - 10 })
        #expect(recorder.all.count == 1)

        cluster.setBrokerUp(1)
        #expect(waitFor(timeout: .seconds(30)) { recorder.all.count == count + 1 })
        #expect(producer.outboxCount == 0)
        #expect(recorder.all.allSatisfy { $0.error == nil })
        #expect(Set(recorder.all.map(\.tag)) == Set(0...UInt64(count)))
        let stored = try KafkaTopicReader.readAll(
            bootstrapServers: cluster.bootstrapServers, topic: "outbox", expectedCount: count + 1, timeoutMilliseconds: 20_000,
            settleMilliseconds: 500)
        #expect(stored.count == count + 1)
        #expect(Set(stored.compactMap(\.value)).count == count + 1)
    }

    /// `produceNow` hands a record to librdkafka on the calling thread only while the outbox is
    /// empty (so a thread's records keep their order) and the queue has room; otherwise it
    /// refuses at once and the caller enqueues. Every record, either way, is delivered once.
    @Test func produceNowTakesARecordOnlyWhenNothingWaitsBeforeIt() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("direct", partitions: 1)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: ["reconnect.backoff.max.ms": "200"],
            queueCapacity: (messages: 3, kilobytes: 1024), logger: KafkaTestSupport.logger,
            deliveryHandler: recorder.handler)
        func record(_ tag: UInt64) -> KafkaOutboundRecord {
            KafkaOutboundRecord(topic: "direct", key: nil, value: Array("v\(tag)".utf8),
                                headers: [KafkaHeader(name: "request-id", value: Array("r\(tag)".utf8))], tag: tag)
        }
        // `fromBytes`: the form that takes the value as bytes in scratch memory (odd tags by default).
        func produceNow(_ tag: UInt64, fromBytes: Bool? = nil) -> Bool {
            let record = record(tag)
            guard fromBytes ?? (tag % 2 == 1) else { return producer.produceNow(record) }
            return record.value.withUnsafeBytes {
                producer.produceNow(topic: record.topic, key: record.key, value: $0, headers: record.headers, tag: record.tag)
            }
        }
        #expect(produceNow(0))
        #expect(waitFor { recorder.all.count == 1 })

        cluster.setBrokerDown(1)
        // Taken while librdkafka has room; refused (not waited for) once its queue is full.
        for tag in UInt64(1)...3 { #expect(produceNow(tag)) }
        #expect(!produceNow(4, fromBytes: false))
        #expect(!produceNow(4, fromBytes: true))
        producer.enqueue(record(4))
        #expect(producer.outboxCount == 1)
        cluster.setBrokerUp(1)
        #expect(waitFor(timeout: .seconds(30)) { recorder.all.count == 5 && producer.outboxCount == 0 })

        // A record waits in the outbox (the publisher thread not woken for it): the queue has
        // room, but nothing may pass that record.
        producer.enqueue(record(5), wakingPublisher: false)
        #expect(!produceNow(6, fromBytes: false))
        #expect(!produceNow(6, fromBytes: true))
        producer.enqueue(record(6))
        #expect(waitFor(timeout: .seconds(30)) { recorder.all.count == 7 })
        #expect(recorder.all.allSatisfy { $0.error == nil })
        let stored = try KafkaTopicReader.readAll(
            bootstrapServers: cluster.bootstrapServers, topic: "direct", expectedCount: 7, timeoutMilliseconds: 20_000,
            settleMilliseconds: 200)
        #expect(stored.compactMap(\.value).map { String(decoding: $0, as: UTF8.self) } == (0...6).map { "v\($0)" })

        producer.close()
        #expect(!produceNow(7, fromBytes: false))
        #expect(!produceNow(7, fromBytes: true))
    }

    /// Threads producing with `produceNow` (falling back to `enqueue`) while another closes the
    /// producer: no call blocks or crashes, and every record gets exactly one delivery report,
    /// delivered before the close or failed with it. Also with the topic's handle kept by the
    /// producer, which the close destroys while the others still produce.
    @Test(arguments: [false, true])
    func produceNowRacingCloseReportsEveryRecordOnce(keepsTopicHandle: Bool) throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("race", partitions: 4)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], queueCapacity: (messages: 200, kilobytes: 1024),
            outputTopics: keepsTopicHandle ? ["race"] : [], logger: KafkaTestSupport.logger, deliveryHandler: recorder.handler)
        let threads = 4, perThread = 1_000
        DispatchQueue.concurrentPerform(iterations: threads + 1) { worker in
            guard worker < threads else {
                _ = recorder.wait(forCount: 200, seconds: 15)  // close while the others still produce
                producer.close(flushTimeoutMilliseconds: 2_000)
                return
            }
            for index in 0..<perThread {
                let record = KafkaOutboundRecord(topic: "race", key: nil, value: [UInt8(index & 0xFF)], headers: [],
                                                 tag: UInt64(worker * perThread + index))
                if !producer.produceNow(record) { producer.enqueue(record) }
            }
        }
        #expect(recorder.wait(forCount: threads * perThread, seconds: 30))
        let reports = recorder.all
        #expect(reports.count == threads * perThread)
        #expect(Set(reports.map(\.tag)) == Set((0..<threads * perThread).map(UInt64.init)))
        #expect(reports.contains { $0.error == nil })
    }

    @Test func recordsStillInTheOutboxAtCloseAreReportedAsFailed() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("closing", partitions: 1)
        let recorder = DeliveryRecorder()
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], queueCapacity: (messages: 2, kilobytes: 1024),
            logger: KafkaTestSupport.logger, deliveryHandler: recorder.handler)
        cluster.setBrokerDown(1)
        for index in 0..<20 {
            producer.enqueue(KafkaOutboundRecord(topic: "closing", key: nil, value: [UInt8(index)], headers: [], tag: UInt64(index)))
        }
        #expect(waitFor { producer.inFlightCount == 2 })
        producer.close(flushTimeoutMilliseconds: 200)
        let reports = recorder.all
        #expect(reports.count == 20)
        #expect(reports.allSatisfy { $0.error != nil })
        #expect(Set(reports.map(\.tag)) == Set(0..<20))
        producer.enqueue(KafkaOutboundRecord(topic: "closing", key: nil, value: [1], headers: [], tag: 99))
        #expect(recorder.all.last?.tag == 99)
        #expect(recorder.all.last?.error?.code == KafkaError.Code.closed)
    }
}
