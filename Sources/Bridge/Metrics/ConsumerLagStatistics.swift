import JSON
import Kafka

/// Consumer lag per partition, read from librdkafka's statistics JSON (`statistics.interval.ms`):
/// `topics.<name>.partitions.<id>.consumer_lag`.
///
/// librdkafka reports `-1` where it does not know the lag yet (no committed or fetch position, no
/// high watermark) and lists the internal partition `-1`; both are left out.
enum ConsumerLagStatistics {
    /// Lag by partition; empty when the document is not usable.
    static func parse(_ bytes: [UInt8]) -> [KafkaTopicPartition: Int64] {
        guard let document = try? JSONScanner.parse(bytes), document.root.kind == .object,
              let topics = document.root["topics"], topics.kind == .object else { return [:] }
        var lag: [KafkaTopicPartition: Int64] = [:]
        for (topicKey, topic) in topics.members {
            guard let name = topicKey.stringValue, topic.kind == .object,
                  let partitions = topic["partitions"], partitions.kind == .object else { continue }
            for (_, partition) in partitions.members {
                guard partition.kind == .object,
                      let id = partition["partition"]?.int64Value, id >= 0, id <= Int64(Int32.max),
                      let value = partition["consumer_lag"]?.int64Value, value >= 0 else { continue }
                lag[KafkaTopicPartition(topic: name, partition: Int32(id))] = value
            }
        }
        return lag
    }
}
