@testable import Kafka
import Testing

/// A client whose start fails after every stored property was set is released normally, so its
/// `deinit` runs `close`: that close must neither touch the destroyed librdkafka handle nor
/// destroy anything twice (the AddressSanitizer run checks the memory; a trap or a hang fails
/// the plain run).
@Suite(.timeLimit(.minutes(1)))
struct ClientStartFailureTests {
    /// librdkafka refuses a subscription that names a topic twice, after the consumer was made.
    @Test func aConsumerWhoseSubscriptionIsRefusedThrowsAndIsReleasedCleanly() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                bootstrapServers: "127.0.0.1:9", groupID: "g", topics: ["requests", "requests"],
                properties: [:], logger: KafkaTestSupport.logger)
        }
        #expect(error?.message.contains("subscribe to requests,requests") == true)
        // The module still makes working consumers afterwards.
        let consumer = try KafkaConsumer(
            bootstrapServers: "127.0.0.1:9", groupID: "g", topics: ["requests"], properties: [:],
            logger: KafkaTestSupport.logger)
        consumer.close(timeoutMilliseconds: 0)
    }

    /// The delivery-report thread is the last thing a producer starts; its topic handles and
    /// client exist by then and go once, through `close`.
    @Test func aProducerWhoseThreadCannotStartThrowsItsReasonAndIsReleasedCleanly() throws {
        let refusal = KafkaError(code: KafkaError.Code.invalidArgument, message: "could not start thread kafka-publisher: errno 11")
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                bootstrapServers: "127.0.0.1:9", properties: [:], queueCapacity: nil, transactionalID: nil,
                outputTopics: ["results", "invalid-tokens"], logger: KafkaTestSupport.logger,
                startThread: { _, _ in throw refusal }, deliveryHandler: { _, _ in })
        }
        #expect(error?.message == refusal.message)
    }
}
