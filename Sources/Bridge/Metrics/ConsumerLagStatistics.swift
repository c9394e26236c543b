import JSON
import Kafka

/// Consumer lag per partition, read from librdkafka's statistics JSON (`statistics.interval.ms`):
/// `topics.<name>.partitions.<id>.consumer_lag`.
///
/// librdkafka reports `-1` where it does not know the lag: before the group has committed (or
/// this consumer stored) any offset of the partition, and before it knows the high watermark. A
/// group that has committed nothing yet reads from the start of the partition (the consumer's
/// `auto.offset.reset=earliest`), so there the lag is the whole partition, high watermark minus
/// low: a bridge that cannot complete its very first records still shows its backlog growing.
/// Partitions with neither figure, and the internal partition `-1`, are left out.
enum ConsumerLagStatistics {
    /// What one statistics document says of the partitions.
    struct Snapshot: Equatable {
        /// Lag by partition.
        var lag: [KafkaTopicPartition: Int64] = [:]
        /// The group's committed offset by partition, where it has one (for the lag of a paused
        /// partition, whose high watermark the statistics no longer follow: ``PausedPartitionLagProbe``).
        var committed: [KafkaTopicPartition: Int64] = [:]
    }

    /// Lag by partition; empty when the document is not usable.
    static func parse(_ bytes: [UInt8]) -> [KafkaTopicPartition: Int64] {
        snapshot(bytes).lag
    }

    /// Lag and committed offset by partition; empty when the document is not usable.
    static func snapshot(_ bytes: [UInt8]) -> Snapshot {
        guard let document = try? JSONScanner.parse(bytes), document.root.kind == .object,
              let topics = document.root["topics"], topics.kind == .object else { return Snapshot() }
        var snapshot = Snapshot()
        for (topicKey, topic) in topics.members {
            guard let name = topicKey.stringValue, topic.kind == .object,
                  let partitions = topic["partitions"], partitions.kind == .object else { continue }
            for (_, partition) in partitions.members {
                guard partition.kind == .object,
                      let id = partition["partition"]?.int64Value, id >= 0, id <= Int64(Int32.max) else { continue }
                let topicPartition = KafkaTopicPartition(topic: name, partition: Int32(id))
                if let value = Self.lag(of: partition) { snapshot.lag[topicPartition] = value }
                if let value = partition["committed_offset"]?.int64Value, value >= 0 { snapshot.committed[topicPartition] = value }
            }
        }
        return snapshot
    }


    /// librdkafka's `consumer_lag`, or with no committed or stored offset yet, the partition's
    /// records from its low to its high watermark; nil when neither is known.
    private static func lag(of partition: JSONValue) -> Int64? {
        if let reported = partition["consumer_lag"]?.int64Value, reported >= 0 { return reported }
        guard let committed = partition["committed_offset"]?.int64Value, committed < 0,
              let stored = partition["stored_offset"]?.int64Value, stored < 0,
              let low = partition["lo_offset"]?.int64Value, low >= 0,
              let high = partition["hi_offset"]?.int64Value, high >= low else { return nil }
        return high - low
    }
}
