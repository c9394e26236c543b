import Foundation
import Kafka
import Testing

@Suite(.timeLimit(.minutes(2)))
struct KafkaRebalanceTests {
    @Test func twoMembersSharePartitionsThroughCooperativeRebalancing() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("shared", partitions: 4)

        let firstEvents = RebalanceRecorder()
        let first = try KafkaConsumer(
            bootstrapServers: cluster.bootstrapServers, groupID: "sharers", topics: ["shared"],
            properties: KafkaTestSupport.fastGroupProperties, logger: KafkaTestSupport.logger)
        defer { first.close() }
        first.rebalanceHandler = firstEvents.handler
        #expect(try KafkaTestSupport.poll([first], seconds: 20) { try first.assignment().count == 4 })
        #expect(firstEvents.all == [.assigned((0..<4).map { KafkaTopicPartition(topic: "shared", partition: $0) })])

        let secondEvents = RebalanceRecorder()
        let second = try KafkaConsumer(
            bootstrapServers: cluster.bootstrapServers, groupID: "sharers", topics: ["shared"],
            properties: KafkaTestSupport.fastGroupProperties, logger: KafkaTestSupport.logger)
        second.rebalanceHandler = secondEvents.handler
        // Usually balanced within seconds; on a loaded machine librdkafka's mock coordinator has
        // taken one more round per session (5 s each), up to about 40 s, before handing the
        // revoked partitions to the new member.
        let balanced = try KafkaTestSupport.poll([first, second], seconds: 80) {
            try first.assignment().count == 2 && second.assignment().count == 2
        }
        #expect(balanced)
        let firstAssignment = Set(try first.assignment())
        let secondAssignment = Set(try second.assignment())
        #expect(firstAssignment.isDisjoint(with: secondAssignment))
        #expect(firstAssignment.union(secondAssignment).count == 4)

        // Cooperative: the first member gave up only the two partitions that moved.
        let revoked = firstEvents.all.compactMap { event -> [KafkaTopicPartition]? in
            if case .revoked(let partitions) = event { return partitions }
            return nil
        }
        #expect(revoked.flatMap { $0 }.count == 2)
        #expect(Set(revoked.flatMap { $0 }) == secondAssignment)
        let assignedToSecond = secondEvents.all.compactMap { event -> [KafkaTopicPartition]? in
            if case .assigned(let partitions) = event { return partitions }
            return nil
        }
        #expect(Set(assignedToSecond.flatMap { $0 }) == secondAssignment)

        // Leaving revokes the second member's partitions (reported before they go), and the
        // first member takes them over.
        second.close()
        let lastOfSecond = try #require(secondEvents.all.last)
        guard case .revoked(let leaving) = lastOfSecond else {
            Issue.record("expected a revocation at close, got \(lastOfSecond)")
            return
        }
        #expect(Set(leaving) == secondAssignment)
        #expect(try KafkaTestSupport.poll([first], seconds: 20) { try first.assignment().count == 4 })
    }
}
