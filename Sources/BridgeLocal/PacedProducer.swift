import Bridge
import Foundation
import Kafka
import Observability
import Synchronization

/// Produces records to the request topic at a steady rate on a thread of its own (the paced run
/// of `apns-bridge bench`): every 2 ms it produces what is due by then, with `linger.ms` 0 so a
/// record's Kafka timestamp is when it was due, not when a batch filled up.
///
/// The producer is made before the run and warmed up (`produceAndWait`, used for the bench's
/// warm-up rounds): an idempotent producer's first records wait for its producer id, the
/// connection and the topic's metadata, up to about a second, which would otherwise count as
/// time the bridge adds.
///
/// Each tick's records go to one partition, the next tick's to the next: one message set per
/// tick. librdkafka 2.0.2's mock broker answers a fetch with at most one message set per
/// partition and finds the fetch offset by walking the partition's list of message sets, so
/// records keyed over every partition (a few per partition per tick) would make the consumer
/// fetch once per few records per partition, more slowly as the lists grow; a real broker
/// returns everything up to `max.partition.fetch.bytes` and indexes its offsets.
public final class PacedProducer: Sendable {
    private let producer: KafkaProducer
    private let topic: String
    private let partitions: Int32
    private let done = Atomic<Bool>(false)
    /// Records refused or not acknowledged; shared with the producer's delivery handler.
    private let failures = FailureCounter()

    private final class FailureCounter: Sendable {
        let count = Atomic<Int>(0)
        func add() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    /// Connects a producer to the environment's request topic; nothing is produced yet.
    public init(environment: LocalEnvironment) throws {
        let failures = failures
        producer = try KafkaProducer(
            bootstrapServers: environment.kafka.bootstrapServers, properties: ["linger.ms": "0"],
            logger: Logger(label: "bench.paced-producer"),
            deliveryHandler: { _, error in if error != nil { failures.add() } }
        )
        topic = environment.requestTopic
        partitions = max(environment.partitions, 1)
    }

    /// Produces `records` at once (keyed as usual) and waits until Kafka acknowledged them.
    /// - Throws: `LocalRunError` when one was refused or not acknowledged within 60 seconds.
    public func produceAndWait(_ records: [DemoWorkload.Record]) throws {
        let failedBefore = failures.value
        for (index, record) in records.enumerated() {
            try producer.produce(topic: topic, key: record.key, value: record.value, headers: [], tag: UInt64(index))
        }
        guard producer.flush(timeoutMilliseconds: 60_000), failures.value == failedBefore else {
            throw LocalRunError(component: "paced producer", message: "not every request reached Kafka")
        }
    }

    /// Starts producing `records` at `recordsPerSecond`, rotating over the request topic's
    /// partitions tick by tick; `isDone` once all are acknowledged (or refused).
    public func start(records: [DemoWorkload.Record], recordsPerSecond: Double) {
        let thread = Thread { [self] in
            let start = Timestamp.monotonicNanoseconds()
            var produced = 0
            var tick: Int32 = 0
            while produced < records.count {
                let elapsed = Double(Timestamp.monotonicNanoseconds() - start) / 1e9
                let due = min(records.count, Int(elapsed * recordsPerSecond) + 1)
                while produced < due {
                    let record = records[produced]
                    do {
                        try producer.produce(topic: topic, key: record.key, value: record.value, headers: [],
                                             tag: UInt64(produced), partition: tick % partitions)
                    } catch {
                        failures.add()
                    }
                    produced += 1
                }
                tick &+= 1
                usleep(2_000)
            }
            if !producer.flush(timeoutMilliseconds: 60_000) { failures.add() }
            done.store(true, ordering: .releasing)
        }
        thread.start()
    }

    /// Whether every record was produced and acknowledged (or refused).
    public var isDone: Bool { done.load(ordering: .acquiring) }

    /// Records refused or not acknowledged.
    public var failureCount: Int { failures.value }

    /// Closes the producer (after `isDone`, or when the run is abandoned).
    public func close() {
        producer.close()
    }
}
