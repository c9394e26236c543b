import Dispatch
@testable import Kafka
import Testing

/// The list of partitions revoked during a poll: what the polling loop asks for every record.
@Suite
struct RevokedPartitionsTests {
    private static let first = KafkaTopicPartition(topic: "requests", partition: 0)
    private static let second = KafkaTopicPartition(topic: "requests", partition: 1)

    @Test func containsWhatWasRevokedUntilAssignedAgainOrTaken() {
        let revoked = RevokedPartitions()
        #expect(!revoked.contains(Self.first))
        revoked.add([Self.first, Self.second])
        #expect(revoked.contains(Self.first) && revoked.contains(Self.second))
        revoked.remove([Self.second])  // assigned again within the same poll
        #expect(revoked.contains(Self.first) && !revoked.contains(Self.second))
        #expect(revoked.takeAll() == [Self.first])
        #expect(!revoked.contains(Self.first) && revoked.takeAll().isEmpty)
    }

    @Test func aRevocationOnAnotherThreadIsSeenOnceItReturned() {
        let revoked = RevokedPartitions()
        for round in 0..<1_000 {
            let partition = KafkaTopicPartition(topic: "requests", partition: Int32(round))
            DispatchQueue.global().sync { revoked.add([partition]) }
            #expect(revoked.contains(partition))
            #expect(revoked.takeAll() == [partition])
        }
    }
}
