import Kafka
import Testing
@testable import Bridge

/// What the consumer polls while it waits for room: sized by fan-out and bytes, kept in order.
@Suite struct AdmissionQueueTests {
    static func message(_ offset: Int64, bytes: Int) -> KafkaMessage {
        KafkaMessage(topic: "t", partition: 0, offset: offset, key: nil, value: [UInt8](repeating: 0x20, count: bytes),
                     headers: [], timestampMilliseconds: nil)
    }

    @Test func pollsAssumeTheLargestFanOutUntilRecordsShowOtherwise() {
        var queue = AdmissionQueue(largestWork: 10_000)
        #expect(queue.pollSize(room: 20_000) == 2)
        #expect(queue.pollSize(room: 0) == 1)  // always at least one, so the group sees polls
        for _ in 0..<1_000 { queue.recordWork(5) }
        #expect(queue.pollSize(room: 20_000) == 1000)
        queue.recordWork(5_000)  // a large request: polls shrink at once
        #expect(queue.pollSize(room: 20_000) == 4)
    }

    @Test func largeRecordsLimitWhatAPollBringsIn() {
        var queue = AdmissionQueue(largestWork: 1)
        queue.append(Self.message(0, bytes: 400_000), progress: nil)
        #expect(queue.pollSize(room: 20_000) == AdmissionQueue.waitingByteBudget / 400_000)
    }

    @Test func recordsLeaveInOrderWithTheProgressTheyWerePolledUnder() {
        var queue = AdmissionQueue(largestWork: 1)
        let progress = PartitionProgress(topicPartition: KafkaTopicPartition(topic: "t", partition: 0),
                                         storeQueue: OffsetStoreQueue { _, _ in })
        for offset in Int64(0)..<3 {
            queue.append(Self.message(offset, bytes: 10), progress: progress)
        }
        queue.append(KafkaMessage(topic: "other", partition: 1, offset: 9, key: nil, value: nil, headers: [],
                                  timestampMilliseconds: nil), progress: nil)
        #expect(queue.count == 4)
        for offset in Int64(0)..<3 {
            let entry = queue.popFirst()
            #expect(entry?.message.offset == offset)
            #expect(entry?.progress === progress)
        }
        let unassigned = queue.popFirst()
        #expect(unassigned?.message.topic == "other")
        #expect(unassigned?.progress == nil)  // not assigned when polled: skipped by the pipeline
        #expect(queue.isEmpty)
        #expect(queue.popFirst() == nil)
    }
}
