import Kafka
import Synchronization
import Observability

/// The bookkeeping of one input record while its outputs are on their way to Kafka.
///
/// Every output record the input causes holds one count, and so does the fan-out until it has
/// handed out every notification. A count is taken before its output is produced and given back
/// by the delivery report; when the last one is given back the input offset is complete and may
/// join the partition's committable prefix. The object travels through the HTTP/2 loops and
/// librdkafka as a retained `Unmanaged` pointer in a `UInt64` tag: no lookup table, no lock.
final class RequestContext: Sendable {
    /// Request id, app, environment, source and start time, as every result repeats them.
    let facts: APNsAnswerInterpreter.RequestFacts
    /// The request id as a record key, and as the `request-id` header of every output.
    let requestIDBytes: [UInt8]
    let requestIDHeader: [(name: String, value: [UInt8])]
    private let partition: PartitionProgress
    private let remaining = Atomic<Int>(1)

    init(
        source: RecordSource,
        requestID: String,
        app: String,
        environment: PushEnvironment,
        startedAtMilliseconds: Int64?,
        partition: PartitionProgress
    ) {
        self.facts = APNsAnswerInterpreter.RequestFacts(
            requestID: requestID, app: app, environment: environment, source: source,
            startedAtMilliseconds: startedAtMilliseconds
        )
        self.partition = partition
        self.requestIDBytes = Array(requestID.utf8)
        self.requestIDHeader = [(name: "request-id", value: requestIDBytes)]
    }

    var source: RecordSource { facts.source }
    var requestID: String { facts.requestID }
    var app: String { facts.app }
    /// Record timestamp (ms since the epoch) that `latency_ms` counts from; nil when unusable.
    var startedAtMilliseconds: Int64? { facts.startedAtMilliseconds }

    /// Takes `count` more holds; call before handing out the outputs or notifications they cover.
    func retain(_ count: Int = 1) {
        remaining.add(count, ordering: .relaxed)
    }

    /// Gives back one hold; the last one completes the input offset.
    func release() {
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            partition.complete(source.offset)
        }
    }

    /// The context as a tag that keeps it alive until `fromTag` takes it back.
    func retainedTag() -> UInt64 {
        UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque()))
    }

    /// Takes back a context passed through `retainedTag()`; each tag is taken back exactly once.
    static func fromTag(_ tag: UInt64) -> RequestContext {
        // invariant: tags only ever come from retainedTag(), so the bit pattern is a live pointer.
        let pointer = UnsafeRawPointer(bitPattern: UInt(tag))!
        return Unmanaged<RequestContext>.fromOpaque(pointer).takeRetainedValue()
    }
}

/// The completion state of one assigned partition: which offsets are done and what may be stored.
///
/// A new object is made for every assignment, so work that finishes after a revocation updates
/// only the old object (`isRevoked`) and never stores an offset for a partition this member no
/// longer owns. Offsets are stored under the lock, so stores never go backwards.
final class PartitionProgress: Sendable {
    let topicPartition: KafkaTopicPartition
    private let tracker = Locked(PartitionOffsetTracker())
    private let revoked = Atomic<Bool>(false)
    private let store: @Sendable (KafkaTopicPartition, Int64) -> Void

    init(topicPartition: KafkaTopicPartition, store: @escaping @Sendable (KafkaTopicPartition, Int64) -> Void) {
        self.topicPartition = topicPartition
        self.store = store
    }

    /// Registers an offset in consumption order.
    func track(_ offset: Int64) {
        tracker.withLock { _ = $0.track(offset) }
    }

    /// Offsets consumed and not yet committable.
    var pendingCount: Int {
        tracker.withLock { $0.pendingCount }
    }

    /// Stops storing offsets: the partition was revoked or lost.
    func revoke() {
        revoked.store(true, ordering: .releasing)
    }

    /// Marks an offset complete and stores the grown committable prefix, if any.
    func complete(_ offset: Int64) {
        tracker.withLock { tracker in
            tracker.complete(offset)
            if let next = tracker.committableNextOffset(), !revoked.load(ordering: .acquiring) {
                store(topicPartition, next)
            }
        }
    }
}
