import Foundation
import HTTP2
import Kafka
import Observability
import Testing
import TestSupport
@testable import Bridge

/// Results published on an event loop wake the producer's publisher thread at the end of the
/// loop iteration (one wake-up for many records); elsewhere at once. Against the mock cluster.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ProducerWakeUpsTests {
    @Test func recordsEnqueuedOnALoopWithoutWakingAreDeliveredAfterTheIteration() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic("out", partitions: 1)
        let delivered = Locked<[UInt64]>([])
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: Logger(label: "test.producer"),
            deliveryHandler: { tag, error in if error == nil { delivered.withLock { $0.append(tag) } } })
        defer { producer.close() }
        let group = try EventLoopGroup(threads: 2, name: "wake-test")
        defer { group.shutdown() }
        let wakeUps = ProducerWakeUps(loops: group.loops, producer: producer)

        #expect(!wakeUps.deferWakeUp())  // not a loop thread: the caller wakes at once
        let deferredOnLoop = Locked<[Bool]>([])
        for loop in group.loops {
            loop.execute {
                for tag in 1...50 {
                    let deferred = wakeUps.deferWakeUp()
                    deferredOnLoop.withLock { $0.append(deferred) }
                    producer.enqueue(KafkaOutboundRecord(topic: "out", key: nil, value: [1], headers: [], tag: UInt64(tag)),
                                     wakingPublisher: !deferred)
                }
            }
        }
        #expect(waitFor(timeout: .seconds(20)) { delivered.withLock { $0.count } == 100 })
        #expect(deferredOnLoop.withLock { $0 }.allSatisfy { $0 })
    }
}
