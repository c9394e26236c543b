import Foundation
import Kafka
import Observability
import Synchronization
import TestSupport
import Testing

/// Collects delivery reports from a producer's poll thread.
final class DeliveryRecorder: Sendable {
    private let reports = Locked<[(tag: UInt64, error: KafkaError?)]>([])

    var handler: @Sendable (UInt64, KafkaError?) -> Void {
        { [self] tag, error in reports.withLock { $0.append((tag, error)) } }
    }

    var all: [(tag: UInt64, error: KafkaError?)] { reports.withLock { $0 } }

    /// Waits until at least `count` reports arrived or `seconds` passed.
    func wait(forCount count: Int, seconds: Double) -> Bool {
        waitFor(timeout: .milliseconds(Int64(seconds * 1000))) { reports.withLock { $0.count } >= count }
    }
}

/// Collects rebalance events from a consumer's polling thread.
final class RebalanceRecorder: Sendable {
    private let events = Locked<[KafkaRebalanceEvent]>([])

    var handler: @Sendable (KafkaRebalanceEvent) -> Void {
        { [self] event in events.withLock { $0.append(event) } }
    }

    var all: [KafkaRebalanceEvent] { events.withLock { $0 } }
}

enum KafkaTestSupport {
    static let logger = Logger(label: "test.kafka")

    /// Consumer settings that make group changes quick on the mock cluster.
    static let fastGroupProperties: [String: String] = [
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "300",
        "topic.metadata.refresh.interval.ms": "1000",
        "auto.commit.interval.ms": "500",
        "fetch.wait.max.ms": "50",
    ]

    /// Polls until `count` messages arrived or `seconds` passed.
    static func consume(_ consumer: KafkaConsumer, count: Int, seconds: Double) throws -> [KafkaMessage] {
        let deadline = Date().addingTimeInterval(seconds)
        var messages: [KafkaMessage] = []
        while messages.count < count, Date() < deadline {
            messages += try consumer.poll(maxMessages: 500, timeoutMilliseconds: 100)
        }
        return messages
    }

    /// Polls (and discards) until `condition` holds or `seconds` passed.
    static func poll(_ consumers: [KafkaConsumer], seconds: Double, until condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            for consumer in consumers {
                _ = try consumer.poll(maxMessages: 500, timeoutMilliseconds: 50)
            }
            if try condition() { return true }
        }
        return false
    }

    /// A consumer in group `groupID` of `topic` on `cluster`, with ``fastGroupProperties``.
    static func groupConsumer(of topic: String, groupID: String, on cluster: MockKafkaCluster) throws -> KafkaConsumer {
        try KafkaConsumer(bootstrapServers: cluster.bootstrapServers, groupID: groupID, topics: [topic],
                          properties: fastGroupProperties, logger: logger)
    }

    /// Creates `topic` on `cluster` with `partitions` partitions and fills it with `count` records
    /// of ``produce(_:topic:count:tagBase:first:)``, all acknowledged before it returns.
    static func createFilledTopic(_ topic: String, partitions: Int32, count: Int, on cluster: MockKafkaCluster) throws {
        try cluster.createTopic(topic, partitions: partitions)
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: logger,
            deliveryHandler: { _, _ in })
        defer { producer.close() }
        try produce(producer, topic: topic, count: count)
        #expect(producer.flush(timeoutMilliseconds: 10_000))
    }

    /// Produces `count` records `value-<i>` with key `key-<i>`, header `request-id: r<i>` and
    /// tag `tagBase + i`, then flushes.
    static func produce(
        _ producer: KafkaProducer, topic: String, count: Int, tagBase: UInt64 = 0, first: Int = 0
    ) throws {
        for index in first..<(first + count) {
            try producer.produce(
                topic: topic, key: Array("key-\(index)".utf8), value: Array("value-\(index)".utf8),
                headers: [KafkaHeader(name: "request-id", value: Array("r\(index)".utf8))], tag: tagBase + UInt64(index))
        }
    }
}
