@testable import Kafka
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

    /// The properties that carry the guarantees are the values librdkafka runs the clients
    /// with (read back from each client's configuration), next to properties passed through:
    /// refusing them in the configuration proves nothing if the bridge never set them.
    @Test func theGuaranteeCarryingPropertiesAreWhatTheClientsRunWith() throws {
        let producer = try KafkaProducer(
            bootstrapServers: "127.0.0.1:9", properties: ["linger.ms": "20", "compression.type": "lz4"],
            logger: KafkaTestSupport.logger, deliveryHandler: { _, _ in })
        defer { producer.close(flushTimeoutMilliseconds: 0) }
        #expect(producer.client.effectiveProperty("enable.idempotence") == "true")
        #expect(producer.client.effectiveProperty("acks") == "-1")  // all
        #expect(producer.client.effectiveProperty("linger.ms") == "20")
        #expect(producer.client.effectiveProperty("compression.type") == "lz4")

        for autoCommit in [true, false] {
            let consumer = try KafkaConsumer(
                bootstrapServers: "127.0.0.1:9", groupID: "g", topics: [], properties: ["fetch.min.bytes": "7"],
                logger: KafkaTestSupport.logger, autoCommit: autoCommit)
            defer { consumer.close(timeoutMilliseconds: 0) }
            #expect(consumer.client.effectiveProperty("enable.auto.offset.store") == "false")
            #expect(consumer.client.effectiveProperty("enable.auto.commit") == String(autoCommit))
            #expect(consumer.client.effectiveProperty("partition.assignment.strategy") == "cooperative-sticky")
            #expect(consumer.client.effectiveProperty("isolation.level") == "read_committed")
            #expect(consumer.client.effectiveProperty("fetch.min.bytes") == "7")
        }
    }

    @Test func everyGuaranteeCarryingPropertyIsRefusedByNameWhateverItsValue() throws {
        for role in [KafkaPropertyRules.Role.consumer, .producer] {
            for name in KafkaPropertyRules.reserved(for: role).keys {
                let error = #expect(throws: KafkaError.self) {
                    try KafkaPropertyRules.validate(["linger.ms": "1", name: "true"], for: role)
                }
                #expect(error?.message.contains("\"\(name)\"") == true)
            }
        }
        for name in ["enable.auto.commit", "partition.assignment.strategy", "isolation.level"] {
            #expect(throws: KafkaError.self) {
                _ = try KafkaConsumer(
                    bootstrapServers: "127.0.0.1:9", groupID: "g", topics: ["t"], properties: [name: "x"],
                    logger: KafkaTestSupport.logger)
            }
        }
        #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                bootstrapServers: "127.0.0.1:9", properties: ["transactional.id": "t"], logger: KafkaTestSupport.logger,
                deliveryHandler: { _, _ in })
        }
    }

    /// `topic.<name>` sets `<name>` in librdkafka (through the default topic configuration), so a
    /// reserved name is refused behind the prefix too; and a consumer that commits on its own
    /// timer refuses a timer of 0, which librdkafka reads as "never".
    @Test func aReservedPropertyIsRefusedBehindTheTopicPrefixAndAutoCommitNeedsItsTimer() throws {
        for (role, name) in [(KafkaPropertyRules.Role.consumer, "topic.auto.offset.reset"), (.producer, "topic.acks"),
                             (.producer, "topic.request.required.acks"), (.consumer, "topic.auto.commit.enable")] {
            let error = #expect(throws: KafkaError.self) { try KafkaPropertyRules.validate([name: "1"], for: role) }
            #expect(error?.message.contains("\"\(name)\"") == true)
        }
        #expect(KafkaPropertyRules.reservation(of: "topic.metadata.refresh.interval.ms", for: .consumer) == nil)
        let stopped = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                bootstrapServers: "127.0.0.1:9", groupID: "g", topics: [], properties: ["auto.commit.interval.ms": "0"],
                logger: KafkaTestSupport.logger)
        }
        #expect(stopped?.message.contains("auto.commit.interval.ms") == true)
        // Without automatic commits (exactly once) the timer is unused, and 0 is accepted.
        try KafkaConsumer.checkSettings(groupID: "g", properties: ["auto.commit.interval.ms": "0"], autoCommit: false)
    }

    /// The throwaway clients of `check` leave out `debug` (their log lines are of no use), and
    /// are not made at all where creating one fetches an OIDC token over the network.
    @Test func theOfflineCheckLeavesOutDebugAndSkipsOIDC() throws {
        #expect(KafkaPropertyRules.checkableOffline(["debug": "all", "linger.ms": "1"]) == ["linger.ms": "1"])
        #expect(KafkaPropertyRules.checkableOffline(["sasl.oauthbearer.method": "OIDC"]) == nil)
        try KafkaProducer.checkSettings(properties: ["debug": "all"], queueCapacity: nil, transactionalID: nil)
    }

    @Test func validationAsksLibrdkafkaWithoutConnecting() throws {
        try KafkaPropertyRules.validate(["fetch.min.bytes": "1", "session.timeout.ms": "45000"], for: .consumer)
        try KafkaPropertyRules.validate(["compression.type": "lz4", "linger.ms": "5"], for: .producer)
        let unknown = #expect(throws: KafkaError.self) {
            try KafkaPropertyRules.validate(["fetch.min.bites": "1"], for: .consumer)
        }
        #expect(unknown?.message.contains("fetch.min.bites") == true)
        let invalid = #expect(throws: KafkaError.self) {
            try KafkaPropertyRules.validate(["compression.type": "s3cret"], for: .producer)
        }
        #expect(invalid?.message.contains("compression.type") == true)
        #expect(invalid?.description.contains("s3cret") == false)
    }

    @Test func propertiesOverrideDefaults() throws {
        let consumer = try KafkaConsumer(
            bootstrapServers: "127.0.0.1:9", groupID: "g", topics: ["t"],
            properties: ["session.timeout.ms": "7000", "fetch.wait.max.ms": "10"],
            logger: KafkaTestSupport.logger)
        consumer.close()
        #expect(throws: KafkaError.self) { try consumer.assignment() }
    }
}
