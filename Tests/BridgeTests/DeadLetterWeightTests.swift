import Kafka
import Observability
import Testing
@testable import Bridge

/// What a dead letter weighs in in-flight work follows the record it is written as, not the
/// input's size: control bytes take six bytes each, bytes that are not UTF-8 four for three.
@Suite struct DeadLetterWeightTests {
    static func message(key: [UInt8]? = nil, value: [UInt8]?, headers: [KafkaHeader] = []) -> KafkaMessage {
        KafkaMessage(topic: "apns.requests", partition: 0, offset: 0, key: key, value: value, headers: headers,
                     timestampMilliseconds: nil)
    }

    @Test func aDeadLetterWeighsWhatItWritesUpToTheProducersLimit() throws {
        // No broker is needed: the producer only tells its `message.max.bytes` (1,000,000).
        let producer = try KafkaProducer(bootstrapServers: "127.0.0.1:9", properties: [:],
                                         logger: Logger(label: "test.producer"), deliveryHandler: { _, _ in })
        defer { producer.close() }
        let publisher = ResultPublisher(producer: producer, kafka: KafkaSettings(brokers: "127.0.0.1:9"))

        // Plain text: its own size (300,000 + the quotes + the key, one per KiB).
        #expect(publisher.deadLetterWeight(of: Self.message(key: Array("p0".utf8), value: Array(repeating: 0x78, count: 300_000))) == 293)
        // 160,000 control bytes are written as 960,000 bytes of `\u0001`.
        #expect(publisher.deadLetterWeight(of: Self.message(value: Array(repeating: 0x01, count: 160_000))) == 938)
        // 300,000 bytes that are not UTF-8: 400,000 of base64.
        #expect(publisher.deadLetterWeight(of: Self.message(value: Array(repeating: 0xFF, count: 300_000))) == 391)
        // Never more than the producer's limit allows, and at least one.
        #expect(publisher.deadLetterWeight(of: Self.message(value: Array(repeating: 0x01, count: 900_000))) == 977)
        #expect(publisher.deadLetterWeight(of: Self.message(value: nil)) == 1)
    }
}
