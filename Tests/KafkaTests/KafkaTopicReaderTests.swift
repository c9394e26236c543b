import Kafka
import Testing

/// `KafkaTopicReader.readToEnd` against the mock cluster: it returns everything a settled topic
/// holds, empty partitions included, and never passes off a read cut short by its timeout as
/// everything.
@Suite(.timeLimit(.minutes(1)))
struct KafkaTopicReaderTests {
    /// Three records with one key (one partition) in a topic of four: three partitions are empty.
    static func sparseTopic() throws -> MockKafkaCluster {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("sparse", partitions: 4)
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: KafkaTestSupport.logger,
            deliveryHandler: { _, _ in })
        defer { producer.close() }
        for index in 0..<3 {
            try producer.produce(topic: "sparse", key: Array("same-key".utf8), value: Array("value-\(index)".utf8),
                                 headers: [], tag: UInt64(index))
        }
        return cluster
    }

    @Test func emptyPartitionsAreReadToTheirEndAtOnce() throws {
        let cluster = try Self.sparseTopic()
        defer { cluster.close() }
        // An empty partition's position stays unset: waiting for it to reach its (zero) end
        // would run into the timeout, which is an error.
        let records = try KafkaTopicReader.readToEnd(
            bootstrapServers: cluster.bootstrapServers, topic: "sparse", timeoutMilliseconds: 30_000)
        #expect(records.count == 3)
        #expect(Set(records.map(\.partition)).count == 1)
        #expect(records.map { String(decoding: $0.value ?? [], as: UTF8.self) } == ["value-0", "value-1", "value-2"])
    }

    @Test func aReadCutShortByItsTimeoutIsAnError() throws {
        let cluster = try Self.sparseTopic()
        defer { cluster.close() }
        #expect(throws: KafkaError.self) {
            try KafkaTopicReader.readToEnd(bootstrapServers: cluster.bootstrapServers, topic: "sparse", timeoutMilliseconds: 0)
        }
    }
}
