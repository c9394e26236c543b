import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import HTTP2
import Kafka
import Observability
import Synchronization

/// The watermarks of the partitions whose fetching is paused, for their consumer lag.
///
/// librdkafka's statistics take a partition's high watermark from its fetch responses, so while
/// the bridge holds a partition paused (no APNs endpoint reachable, the in-flight limit, a
/// record that cannot finish) its reported lag stands still however many requests arrive: the
/// lag gauge and the alert on it would say nothing during the very outage they are for. Every
/// statistics interval this asks the partition leaders for the paused partitions' watermarks, on
/// a thread of its own (the requests block), and ``lag(of:committed:reported:)`` turns them into
/// the lag `/metrics` shows for those partitions.
final class PausedPartitionLagProbe: Sendable {
    /// How long one partition's request may take: bounds how long the consumer's close can wait for it.
    static let requestTimeoutMilliseconds: Int32 = 1000

    private let intervalMilliseconds: Int
    private let pausedPartitions: @Sendable () -> [KafkaTopicPartition]
    private let query: @Sendable ([KafkaTopicPartition], Int32) -> [KafkaTopicPartition: Watermarks]
    private let wakeUp = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let thread = Locked<pthread_t?>(nil)
    private let latest = Locked<[KafkaTopicPartition: Watermarks]>([:])

    /// A partition's first offset and the offset after its last record.
    typealias Watermarks = (low: Int64, high: Int64)

    /// - Parameters:
    ///   - intervalMilliseconds: the time between rounds (the statistics interval).
    ///   - pausedPartitions: the partitions paused now (any thread).
    ///   - query: asks for the watermarks of the partitions given, within the timeout given for each.
    init(intervalMilliseconds: Int, pausedPartitions: @escaping @Sendable () -> [KafkaTopicPartition],
         query: @escaping @Sendable ([KafkaTopicPartition], Int32) -> [KafkaTopicPartition: Watermarks]) {
        self.intervalMilliseconds = max(1, intervalMilliseconds)
        self.pausedPartitions = pausedPartitions
        self.query = query
    }

    /// Starts the rounds on a thread of their own.
    /// - Throws: when the thread cannot be created.
    func start() throws {
        let started = try ThreadStarter.start(name: "kafka lag probe", detached: false) { [self] in
            runRounds()
        }
        thread.withLock { $0 = started }
    }

    /// Ends the rounds and waits for the thread: at most one partition's request. Idempotent.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wakeUp.signal()
        if let started = thread.withLock({ $0 }) {
            pthread_join(started, nil)
        }
    }

    /// The watermarks of the last round, for the partitions paused at that time.
    var watermarks: [KafkaTopicPartition: Watermarks] {
        latest.withLock { $0 }
    }

    /// A paused partition's lag: its high watermark less the group's committed offset (its low
    /// watermark, where the group has committed nothing: it reads from the start), or what the
    /// statistics reported when that is more, or when the watermarks are not known.
    static func lag(of watermarks: Watermarks?, committed: Int64?, reported: Int64?) -> Int64? {
        guard let watermarks else { return reported }
        let position = max(committed ?? watermarks.low, watermarks.low)
        return max(reported ?? 0, max(0, watermarks.high - position))
    }

    private func runRounds() {
        while !stopped.load(ordering: .acquiring) {
            _ = wakeUp.wait(timeout: .now() + .milliseconds(intervalMilliseconds))
            guard !stopped.load(ordering: .acquiring) else { return }
            var answered: [KafkaTopicPartition: Watermarks] = [:]
            for partition in pausedPartitions() {
                // One at a time, so that `stop` waits for one request at most.
                guard !stopped.load(ordering: .acquiring) else { return }
                answered.merge(query([partition], Self.requestTimeoutMilliseconds)) { _, new in new }
            }
            latest.withLock { $0 = answered }
        }
    }
}
