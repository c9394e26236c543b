import APNs
import Bridge
import BridgeLocal
import Foundation
import Kafka
import TestSupport
import Testing

/// The event loops never wait on Kafka: with the results' broker down and librdkafka's queue
/// full, the loops keep reading APNs answers; the outputs wait in the outbox, count as in-flight
/// work, and reach Kafka once it is back.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct KafkaStallTests {
    @Test func loopsKeepReadingAnswersWhileTheProducerQueueIsFull() throws {
        let environment = try LocalEnvironment(partitions: 2, brokers: 2)
        defer { environment.close() }
        let groupID = "e2e-stall"
        // Requests and the group on broker 1, every output topic on broker 2.
        for partition in Int32(0)..<2 {
            try environment.kafka.setPartitionLeader(topic: environment.requestTopic, partition: partition, broker: 1)
            for topic in [environment.resultsTopic, environment.invalidTokensTopic, environment.deadLetterTopic] {
                try environment.kafka.setPartitionLeader(topic: topic, partition: partition, broker: 2)
            }
        }
        try environment.kafka.setGroupCoordinator(groupID: groupID, broker: 1)
        let count = 200
        try environment.produceRequests((0..<count).map { index in
            let hex = String(index, radix: 16)
            let token = String(repeating: "0", count: 64 - hex.count) + hex
            return DemoWorkload.Record(key: Array("s\(index)".utf8), value: Array(#"{"id":"s\#(index)","token":"\#(token)","payload":{"aps":{}}}"#.utf8))
        })
        environment.kafka.setBrokerDown(2)

        let yaml = environment.configurationYAML(
            groupID: groupID, extra: "limits: {max_in_flight: 1000}",
            producer: ["queue.buffering.max.messages": "10", "reconnect.backoff.max.ms": "200"])
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        let pipeline = runner.pipeline

        // Every answer read on the loops, while no result can leave: librdkafka holds 10, the
        // outbox the rest. A loop blocked in produce would leave notifications unanswered.
        #expect(waitFor(timeout: .seconds(30)) {
            pipeline.notificationsAwaitingAPNs == 0 && pipeline.outputsAwaitingKafka == count
        }, "APNs \(pipeline.notificationsAwaitingAPNs), Kafka \(pipeline.outputsAwaitingKafka)")
        #expect(pipeline.fatalErrorDescription == nil)
        #expect(try environment.committedRequestCount(groupID: groupID) == 0)

        environment.kafka.setBrokerUp(2)
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000, settleMilliseconds: 500)
        #expect(results.count == count)
        #expect(Set(results.compactMap(\.key)).count == count)
        #expect(waitFor(timeout: .seconds(20)) {
            (try? environment.committedRequestCount(groupID: groupID)) == Int64(count)
        })
        #expect(runner.stop() == 0)
    }
}
