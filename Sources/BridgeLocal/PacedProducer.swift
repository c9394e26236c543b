import Bridge
import Foundation
import Kafka
import Observability
import Synchronization

/// Produces records to the request topic at a steady rate on a thread of its own (the paced run
/// of `apns-bridge bench`): every 2 ms it produces what is due by then, with `linger.ms` 0 so a
/// record's Kafka timestamp is when it was due, not when a batch filled up.
public final class PacedProducer: Sendable {
    private let done = Atomic<Bool>(false)
    private let failures = Atomic<Int>(0)

    /// Starts producing `records` at `recordsPerSecond`.
    public init(environment: LocalEnvironment, records: [DemoWorkload.Record], recordsPerSecond: Double) throws {
        let producer = try KafkaProducer(
            bootstrapServers: environment.kafka.bootstrapServers, properties: ["linger.ms": "0"],
            logger: Logger(label: "bench.paced-producer"),
            deliveryHandler: { [self] _, error in if error != nil { self.failures.add(1, ordering: .relaxed) } }
        )
        let topic = environment.requestTopic
        let thread = Thread { [self] in
            let start = Timestamp.monotonicNanoseconds()
            var produced = 0
            while produced < records.count {
                let elapsed = Double(Timestamp.monotonicNanoseconds() - start) / 1e9
                let due = min(records.count, Int(elapsed * recordsPerSecond) + 1)
                while produced < due {
                    let record = records[produced]
                    do {
                        try producer.produce(topic: topic, key: record.key, value: record.value, headers: [], tag: UInt64(produced))
                    } catch {
                        failures.add(1, ordering: .relaxed)
                    }
                    produced += 1
                }
                usleep(2_000)
            }
            if !producer.flush(timeoutMilliseconds: 60_000) { failures.add(1, ordering: .relaxed) }
            producer.close()
            done.store(true, ordering: .releasing)
        }
        thread.start()
    }

    /// Whether every record was produced and acknowledged (or refused).
    public var isDone: Bool { done.load(ordering: .acquiring) }

    /// Records refused or not acknowledged.
    public var failureCount: Int { failures.load(ordering: .relaxed) }
}
