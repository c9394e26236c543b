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
    /// The in-flight work each counted output of this record stands for until Kafka has it:
    /// 1 for a result, more for a dead letter, which may carry up to `message.max.bytes`
    /// (``ResultPublisher/deadLetterWeight(of:)``), so that `limits.max_in_flight` bounds the
    /// memory outputs hold, not only their number.
    let outputWeight: Int
    private let partition: PartitionProgress
    private let remaining = Atomic<Int>(1)

    init(
        source: RecordSource,
        requestID: String,
        app: String,
        environment: PushEnvironment,
        startedAtMilliseconds: Int64?,
        partition: PartitionProgress,
        outputWeight: Int = 1
    ) {
        self.outputWeight = max(1, outputWeight)
        self.facts = APNsAnswerInterpreter.RequestFacts(
            requestID: requestID, app: app, environment: environment, source: source,
            startedAtMilliseconds: startedAtMilliseconds
        )
        self.partition = partition
    }

    var source: RecordSource { facts.source }
    var requestID: String { facts.requestID }
    /// Runs `body` with the request id's UTF-8 bytes: the key of every result and the value of
    /// every output's `request-id` header.
    func withRequestIDBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var requestID = facts.requestID
        return requestID.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }
    var app: String { facts.app }
    /// Record timestamp (ms since the epoch) that `latency_ms` counts from; nil when unusable.
    var startedAtMilliseconds: Int64? { facts.startedAtMilliseconds }

    /// Takes `count` more holds; call before handing out the outputs or notifications they cover.
    func retain(_ count: Int = 1) {
        remaining.add(count, ordering: .relaxed)
    }

    /// Exactly once: holds `output` back with its input record until the transaction committer
    /// takes it. Returns false when the partition was revoked (the output is dropped).
    func buffer(_ output: KafkaOutboundRecord) -> Bool {
        partition.buffer(output, for: source.offset)
    }

    /// Gives back one hold; the last one completes the input offset.
    func release() {
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            partition.complete(source.offset)
        }
    }

    /// The context as a tag that keeps it alive until `fromTag` takes it back.
    /// - Parameter countsAsWork: false for an output that rides along with another one of the
    ///   same token (an invalid-token record next to its result), which `limits.max_in_flight`
    ///   does not count twice. Kept in the pointer's lowest bit (objects are 16-byte aligned).
    func retainedTag(countsAsWork: Bool = true) -> UInt64 {
        let pointer = UInt64(UInt(bitPattern: Unmanaged.passRetained(self).toOpaque()))
        return countsAsWork ? pointer : pointer | RequestContext.uncountedBit
    }

    private static let uncountedBit: UInt64 = 1

    /// Whether the output behind `tag` counts as in-flight work (see `retainedTag(countsAsWork:)`).
    static func countsAsWork(_ tag: UInt64) -> Bool {
        tag & uncountedBit == 0
    }

    /// Takes back a context passed through `retainedTag()`; each tag is taken back exactly once.
    static func fromTag(_ tag: UInt64) -> RequestContext {
        // invariant: tags only ever come from retainedTag(), so the bit pattern (less the flag) is a live pointer.
        let pointer = UnsafeRawPointer(bitPattern: UInt(tag & ~uncountedBit))!
        return Unmanaged<RequestContext>.fromOpaque(pointer).takeRetainedValue()
    }
}

/// The completion state of one assigned partition: which offsets are done and what may be
/// committed.
///
/// At least once, completed offsets are stored for the consumer's commit as the contiguous
/// prefix grows: a completion that grows it queues the partition in an ``OffsetStoreQueue``,
/// and the consumer thread stores the newest offset of each queued partition. Exactly once, outputs are buffered per record in a ``PartitionOutputSequencer``
/// and the transaction committer takes them in offset order, with the offset to commit.
///
/// A new object is made for every assignment, so work that finishes after a revocation updates
/// only the old object and never stores an offset or buffers an output for a partition this
/// member no longer owns. Offsets are stored, and the revocation is marked, under the lock: once
/// `revoke()` returns no store of this object can happen, so a late completion racing the
/// revocation cannot move the partition's offset (then its new owner's) backwards. Stores never
/// go backwards within one assignment either: the committable prefix only grows.
final class PartitionProgress: Sendable {
    /// How completed offsets leave the partition.
    enum Completion: Sendable {
        /// At least once: queue the partition to store its committable offset for the consumer's commit.
        case storeOffsets(OffsetStoreQueue)
        /// Exactly once: buffer outputs until the transaction committer takes them.
        case transactional
    }

    private struct State: Sendable {
        var tracker = PartitionOffsetTracker()
        var sequencer = PartitionOutputSequencer<KafkaOutboundRecord>()
        var isRevoked = false
        var committedNextOffset: Int64?
        /// At least once: waiting in the store queue for its committable offset to be stored.
        var isQueuedForStore = false
    }

    let topicPartition: KafkaTopicPartition
    private let isTransactional: Bool
    /// At least once: where a grown committable offset is queued. Weak: the queue holds the
    /// partitions queued in it, so a strong reference back would make a cycle that leaks
    /// whenever a queue is not drained (the one-shot `send` never drains its own).
    private weak let storeQueue: OffsetStoreQueue?
    private let state = Locked(State())

    init(topicPartition: KafkaTopicPartition, completion: Completion) {
        self.topicPartition = topicPartition
        switch completion {
        case .storeOffsets(let queue):
            isTransactional = false
            storeQueue = queue
        case .transactional:
            isTransactional = true
            storeQueue = nil
        }
    }

    /// At least once: grown committable offsets are stored through `storeQueue`.
    convenience init(topicPartition: KafkaTopicPartition, storeQueue: OffsetStoreQueue) {
        self.init(topicPartition: topicPartition, completion: .storeOffsets(storeQueue))
    }

    /// Registers an offset in consumption order.
    /// - Returns: false when the record must not be processed: the partition was revoked, or
    ///   the offset is at or below one already tracked in this assignment (a re-delivery after
    ///   an offset reset or a seek). Its earlier delivery is tracked and finishes (or is left
    ///   uncommitted) on its own; processing it again would complete that earlier entry early
    ///   and let the commit pass a record still in flight.
    func track(_ offset: Int64) -> Bool {
        state.withLock { state in
            !state.isRevoked && (isTransactional ? state.sequencer.track(offset) : state.tracker.track(offset))
        }
    }

    /// Offsets the at-least-once tracker has room for (its memory).
    var offsetCapacity: Int {
        state.withLock { $0.tracker.capacity }
    }

    /// Offsets consumed and not yet committable.
    var pendingCount: Int {
        state.withLock { isTransactional ? $0.sequencer.pendingCount : $0.tracker.pendingCount }
    }

    /// Whether a record tracked here is not complete yet: a notification waiting for APNs, or an
    /// output for Kafka's acknowledgement (at least once; exactly once, an output not buffered
    /// yet). False once revoked.
    var hasWorkInFlight: Bool {
        state.withLock { state in
            !state.isRevoked && (isTransactional ? !state.sequencer.isEveryRecordComplete : state.tracker.pendingCount > 0)
        }
    }

    /// Whether `revoke()` was called.
    var isRevoked: Bool {
        state.withLock { $0.isRevoked }
    }

    /// Stops storing offsets and buffering outputs: the partition was revoked or lost. After it
    /// returns, no store from this object happens, even for work completing on another thread at
    /// that moment.
    /// - Parameter weight: what one dropped output counts for (its in-flight weight).
    /// - Returns: the weight of the buffered outputs dropped (exactly once), which the new owner
    ///   produces again.
    @discardableResult
    func revoke(weighing weight: (KafkaOutboundRecord) -> Int = { _ in 1 }) -> Int {
        state.withLock { state in
            state.isRevoked = true
            state.tracker = PartitionOffsetTracker()  // see `storeAndRevoke`
            return state.sequencer.discardAll(weighing: weight)
        }
    }

    /// At least once: stores the committable offset and revokes the partition in one step under
    /// the lock, so a completion is either in the stored offset or after the revocation. (Storing
    /// the queued partitions first and revoking after would miss a completion that has marked the
    /// partition queued but not yet put it in the queue: its offset would be read again by the new
    /// owner.)
    func storeAndRevoke(_ store: (KafkaTopicPartition, Int64) -> Void) {
        state.withLock { state in
            if !state.isRevoked, let next = state.tracker.committableNextOffset() {
                store(topicPartition, next)
            }
            state.isRevoked = true
            // Nothing of a revoked partition is stored again: its offsets are let go, or work that
            // never finishes (an unreachable endpoint, no expiration) would keep every revoked
            // assignment's span in memory, past the bound on uncommitted spans.
            state.tracker = PartitionOffsetTracker()
        }
    }

    /// Exactly once: buffers one output of the pending record `offset`. Returns false when it
    /// is not kept (partition revoked): the new owner produces it again.
    func buffer(_ output: KafkaOutboundRecord, for offset: Int64) -> Bool {
        state.withLock { state in
            !state.isRevoked && state.sequencer.append(output, weight: ResultPublisher.bufferedWeight(of: output), to: offset)
        }
    }

    /// Exactly once: the weight of the outputs buffered behind a record not yet complete (see
    /// ``PartitionOutputSequencer/blockedWeight``); 0 at least once.
    var blockedWeight: Int {
        state.withLock { $0.sequencer.blockedWeight }
    }

    /// Exactly once: the outputs of the complete prefix, in offset order, with the offset to
    /// commit after them; nil when there is none or the partition was revoked.
    func takeReleased() -> PartitionOutputSequencer<KafkaOutboundRecord>.Release? {
        state.withLock { state in
            state.isRevoked ? nil : state.sequencer.takeReleased()
        }
    }

    /// Exactly once: a transaction committed the outputs taken so far and the offset after them.
    func committed(nextOffset: Int64) {
        state.withLock { $0.committedNextOffset = nextOffset }
    }

    /// Exactly once: the offset the last committed transaction committed for this partition.
    var committedNextOffset: Int64? {
        state.withLock { $0.committedNextOffset }
    }

    /// Marks an offset complete: stores the grown committable prefix (at least once), or lets
    /// the record's outputs be released in their turn (exactly once).
    func complete(_ offset: Int64) {
        guard !isTransactional else {
            _ = state.withLock { $0.sequencer.complete(offset) }  // false: not pending or already complete
            return
        }
        let queueNow = state.withLock { state in
            state.tracker.complete(offset)
            guard !state.isRevoked, !state.isQueuedForStore, state.tracker.hasCommittableOffset else { return false }
            state.isQueuedForStore = true
            return true
        }
        if queueNow {
            storeQueue?.enqueue(self)  // no queue any more: nothing is committed (the pipeline is gone)
        }
    }

    /// At least once (``OffsetStoreQueue``): stores the committable offset if it grew since the
    /// last store and the partition is not revoked. The store happens under the lock, so it can
    /// never follow a `revoke()` that has returned.
    func storeQueuedOffset(_ store: (KafkaTopicPartition, Int64) -> Void) {
        state.withLock { state in
            state.isQueuedForStore = false
            if let next = state.tracker.committableNextOffset(), !state.isRevoked {
                store(topicPartition, next)
            }
        }
    }
}
