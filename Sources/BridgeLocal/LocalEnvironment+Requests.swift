import Bridge
import Kafka
import Observability
import Synchronization

extension LocalEnvironment {
    /// Produces `records` to the request topic and waits until Kafka has acknowledged every one.
    /// Shared by the demo and the benchmark.
    /// - Throws: `LocalRunError` when a record was refused or not acknowledged within 60 seconds.
    public func produceRequests<Records: Collection<DemoWorkload.Record>>(_ records: Records) throws {
        let failures = Atomic<Int>(0)
        let producer = try KafkaProducer(
            bootstrapServers: kafka.bootstrapServers, properties: ["linger.ms": "5"],
            logger: Logger(label: "local.producer"),
            deliveryHandler: { _, error in if error != nil { failures.add(1, ordering: .relaxed) } }
        )
        defer { producer.close() }
        for (index, record) in records.enumerated() {
            try producer.produce(topic: requestTopic, key: record.key, value: record.value, headers: [], tag: UInt64(index))
        }
        guard producer.flush(timeoutMilliseconds: 60_000), failures.load(ordering: .relaxed) == 0 else {
            throw LocalRunError(component: "local producer", message: "not every request reached Kafka")
        }
    }

    /// The number of request records `groupID` has committed: the sum of its committed offsets
    /// over every partition of the request topic.
    public func committedRequestCount(groupID: String) throws -> Int64 {
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: kafka.bootstrapServers, groupID: groupID, topic: requestTopic, partitions: partitions
        )
        return committed.values.reduce(0) { $0 + max(0, $1) }
    }
}

/// A demo or benchmark run that could not go on (a failure of the run, not of its configuration:
/// the command exits 1).
public struct LocalRunError: Error, Sendable, CustomStringConvertible {
    /// What failed, e.g. `local producer`.
    public var component: String
    /// Why.
    public var message: String

    /// `component: message`.
    public var description: String { "\(component): \(message)" }
}
