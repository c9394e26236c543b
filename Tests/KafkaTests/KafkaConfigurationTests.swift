import Kafka
import Testing

@Suite(.timeLimit(.minutes(1)))
struct KafkaConfigurationTests {
    @Test func turningAutomaticOffsetStoringOnIsRejected() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                bootstrapServers: "127.0.0.1:9", groupID: "g", topics: ["t"],
                properties: ["enable.auto.offset.store": "true"], logger: KafkaTestSupport.logger)
        }
        #expect(error?.message.contains("enable.auto.offset.store") == true)
    }

    @Test func unknownPropertyIsAnErrorNamingIt() throws {
        let consumerError = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                bootstrapServers: "127.0.0.1:9", groupID: "g", topics: ["t"],
                properties: ["no.such.property": "1"], logger: KafkaTestSupport.logger)
        }
        #expect(consumerError?.message.contains("no.such.property") == true)
        let producerError = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                bootstrapServers: "127.0.0.1:9", properties: ["linger.msec": "1"], logger: KafkaTestSupport.logger,
                deliveryHandler: { _, _ in })
        }
        #expect(producerError?.message.contains("linger.msec") == true)
    }

    @Test func invalidValueIsNamedByPropertyWithoutTheValue() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                bootstrapServers: "127.0.0.1:9", properties: ["linger.ms": "s3cret-value"],
                logger: KafkaTestSupport.logger, deliveryHandler: { _, _ in })
        }
        #expect(error?.message.contains("linger.ms") == true)
        #expect(error?.description.contains("s3cret") == false)
    }

    @Test func weakeningProducerDurabilityIsRejected() throws {
        let idempotence = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                bootstrapServers: "127.0.0.1:9", properties: ["enable.idempotence": "false"],
                logger: KafkaTestSupport.logger, deliveryHandler: { _, _ in })
        }
        #expect(idempotence?.message.contains("enable.idempotence") == true)
        let acks = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                bootstrapServers: "127.0.0.1:9", properties: ["acks": "1"],
                logger: KafkaTestSupport.logger, deliveryHandler: { _, _ in })
        }
        #expect(acks?.message.contains("acks") == true)
    }

    @Test func propertiesOverrideDefaults() throws {
        let consumer = try KafkaConsumer(
            bootstrapServers: "127.0.0.1:9", groupID: "g", topics: ["t"],
            properties: ["auto.offset.reset": "latest", "enable.auto.offset.store": "false"],
            logger: KafkaTestSupport.logger)
        consumer.close()
        #expect(throws: KafkaError.self) { try consumer.assignment() }
    }
}
