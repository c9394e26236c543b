#if canImport(Glibc)
import Glibc
#endif
import HTTP2
import Kafka
import Observability
import Synchronization

/// Exactly-once mode's one producing thread: it takes each partition's released outputs (see
/// ``PartitionOutputSequencer``), produces them in one transaction together with the offsets
/// they complete, and commits.
///
/// A transaction therefore carries, per partition, exactly the outputs of the input records
/// between the previously committed offset and the one it commits. When a transaction fails
/// with an abortable error it is aborted and the same batch (the outputs of every record after
/// the last committed offsets, kept in memory until they commit) is produced again in a new
/// transaction, up to ``Settings/maxAttempts`` times; then, or on a fatal error (fenced by a
/// newer producer with the same `transactional.id`), the pipeline stops with exit status 1 and
/// nothing more is committed.
///
/// Rebalances: before a revoked partition leaves, the consumer thread calls
/// ``finish(revoking:committing:)``, which runs one more transaction cycle and then drops the
/// partition's uncommitted outputs on this thread, so no later transaction can carry them; the
/// new owner starts from the committed offset and produces them again. A lost partition (the
/// group went on without this member) commits nothing more: its outputs are dropped before
/// that cycle, since its new owner may already be committing it.
final class TransactionCommitter: @unchecked Sendable {
    /// When transactions are committed.
    struct Settings: Sendable {
        /// A transaction is committed at most this long after outputs were released.
        var interval: Duration = .milliseconds(100)
        /// Bound on each blocking transaction call.
        var timeoutMilliseconds: Int32 = 30_000
        /// Consecutive aborted attempts of one batch before the pipeline gives up.
        var maxAttempts: Int = 5
        /// The wait after a batch's first abort, doubling after each further one.
        var retryBackoff: Duration = .milliseconds(100)
    }

    /// One partition's share of the open batch.
    private struct Share {
        let progress: PartitionProgress
        var outputs: [KafkaOutboundRecord]
        var nextOffset: Int64
    }

    private struct Control {
        var requestedCycles = 0
        var completedCycles = 0
        var revocations: [PartitionProgress] = []
        var losses: [PartitionProgress] = []
        var stopRequested = false
        var isRunning = false
    }

    /// Whether transactions were initialised (set once, read by the consumer loop per record):
    /// before, no cycle ran and none will run for a partition revoked meanwhile.
    private let initialized = Atomic<Bool>(false)
    private let producer: KafkaProducer
    private let consumer: KafkaConsumer
    private let publisher: ResultPublisher
    private let settings: Settings
    private let partitions: @Sendable () -> [PartitionProgress]
    private let isFailed: @Sendable () -> Bool
    private let onFatal: @Sendable (String) -> Void
    private let logger = Logger(label: "bridge.transactions")
    private let control = Locked(Control())
    /// True while no committer thread runs (before `start`, after it ended).
    private let finished = Locked(true)
    private let statistics = Locked((transactions: 0, aborted: 0, resumed: 0))

    /// The committer thread, for the confinement checks of the members below.
    private let committerThread = Locked<pthread_t?>(nil)
    /// Monotonic time by which every transaction call must end (the shutdown's deadline, once
    /// known); `UInt64.max` until then.
    private let callsEndBy = Atomic<UInt64>(.max)

    // Committer thread only.
    private var batch: [ObjectIdentifier: Share] = [:]
    private var failedAttempts = 0
    private var retryNotBefore: UInt64 = 0
    private var nextDue: UInt64 = 0

    init(
        producer: KafkaProducer, consumer: KafkaConsumer, publisher: ResultPublisher, settings: Settings = Settings(),
        partitions: @escaping @Sendable () -> [PartitionProgress], isFailed: @escaping @Sendable () -> Bool,
        onFatal: @escaping @Sendable (String) -> Void
    ) {
        self.producer = producer
        self.consumer = consumer
        self.publisher = publisher
        self.settings = settings
        self.partitions = partitions
        self.isFailed = isFailed
        self.onFatal = onFatal
    }

    /// Transactions committed and aborted so far, and commit or abort calls made again after
    /// they timed out.
    var transactionCounts: (committed: Int, aborted: Int, resumed: Int) {
        statistics.withLock { ($0.transactions, $0.aborted, $0.resumed) }
    }

    /// Starts the thread: registers the transactional id (fencing older producers with it and
    /// aborting what they left open), then commits until ``stop()``.
    func start() throws {
        control.withLock { $0.isRunning = true }
        finished.withLock { $0 = false }
        do {
            try ThreadStarter.start(name: "kafka-txn", detached: true) { [self] in
                run()
            }
        } catch {
            control.withLock { $0.isRunning = false }
            finished.withLock { $0 = true }
            throw error
        }
    }

    /// Runs one more cycle (committing what is released), then drops the uncommitted outputs of
    /// `revoking` so that no later transaction carries them. Consumer thread (rebalance handler);
    /// waits for the committer thread, never an event loop.
    ///
    /// With `committing` false (partitions lost, not revoked) nothing more of theirs is committed:
    /// their outputs, released or not, and their share of a batch waiting to be tried again are
    /// dropped before that cycle. A transaction carrying them would be validated only by the group
    /// metadata this member no longer holds rightly, while the partitions' new owner commits them.
    /// - Parameter whileWaiting: runs between readings of the committer's progress (the pipeline
    ///   tells `/healthz` that the consumer waits on purpose, not stuck).
    /// - Returns: false when the committer did not answer within the transaction timeout (the
    ///   pipeline is then failed: nothing more is committed).
    @discardableResult
    func finish(revoking: [PartitionProgress], committing: Bool = true, whileWaiting: () -> Void = {}) -> Bool {
        if !committing {
            // Nothing is released from them any more; the batch's share goes on the committer thread.
            for progress in revoking { publisher.buffered(left: progress.revoke(weighing: ResultPublisher.bufferedWeight(of:))) }
        }
        let ticket = control.withLock { control -> Int? in
            // Before transactions are initialised (the coordinator not reachable yet) nothing of
            // these partitions was committed, and the first cycle lists only the partitions
            // still assigned: their outputs are dropped now, not after a wait for the coordinator.
            guard control.isRunning, isReady else { return nil }
            control.requestedCycles += 1
            if committing { control.revocations += revoking } else { control.losses += revoking }
            return control.requestedCycles
        }
        guard let ticket else {
            for progress in revoking { publisher.buffered(left: progress.revoke(weighing: ResultPublisher.bufferedWeight(of:))) }
            return true
        }
        let outcome = BoundedWait(timeoutNanoseconds: UInt64(settings.timeoutMilliseconds) * 2_000_000).wait(
            now: { Timestamp.monotonicNanoseconds() },
            until: { control.withLock { $0.completedCycles >= ticket || !$0.isRunning } },
            shouldStop: { false },
            sleep: {
                usleep(1000)  // consumer thread, inside the rebalance callback
                whileWaiting()
            })
        guard outcome == .done else {
            onFatal("the transaction committer did not finish within \(settings.timeoutMilliseconds * 2) ms during a rebalance")
            for progress in revoking { publisher.buffered(left: progress.revoke(weighing: ResultPublisher.bufferedWeight(of:))) }
            return false
        }
        return true
    }

    /// From now on every transaction call ends by `deadline` (monotonic nanoseconds), and a
    /// batch that cannot be committed by then is left uncommitted rather than retried: the
    /// shutdown's budget (`shutdown_timeout`), which a commit whose records cannot be flushed
    /// would otherwise overrun by its 30 s timeout times its attempts. Any thread.
    func limitCalls(toEndBy deadline: UInt64) {
        callsEndBy.store(deadline, ordering: .relaxed)
    }

    /// Whether transactions were initialised, so that outputs can be committed. Until then the
    /// pipeline admits nothing: a notification sent to APNs before an initialisation that then
    /// fails for good (an authorisation the broker refuses) would be sent again after every
    /// restart. Any thread.
    var isReady: Bool { initialized.load(ordering: .acquiring) }

    /// Whether no committer thread runs (before `start`, or after it ended).
    var hasEnded: Bool { finished.withLock { $0 } }

    /// Commits what is released, stops the thread and waits for it. Idempotent.
    func stop() {
        control.withLock { $0.stopRequested = true }
        while !finished.withLock({ $0 }) {
            usleep(1000)
        }
    }

    // MARK: - Committer thread

    private func run() {
        committerThread.withLock { $0 = pthread_self() }
        defer {
            control.withLock { $0.isRunning = false }
            finished.withLock { $0 = true }
        }
        guard initialize() else { return }
        initialized.store(true, ordering: .releasing)
        while true {
            let (ticket, revoking, lost, stopping) = control.withLock { control in
                defer {
                    control.revocations.removeAll()
                    control.losses.removeAll()
                }
                return (control.requestedCycles, control.revocations, control.losses, control.stopRequested)
            }
            for progress in lost {
                if let share = batch.removeValue(forKey: ObjectIdentifier(progress)) {
                    publisher.buffered(left: ResultPublisher.bufferedWeight(of: share.outputs))
                }
            }
            let now = Timestamp.monotonicNanoseconds()
            let requested = ticket > control.withLock({ $0.completedCycles })
            if requested || stopping || now >= nextDue {
                nextDue = now + settings.interval.totalNanoseconds
                // The leaving partitions are no longer listed by `partitions`: their last
                // releases join this cycle explicitly.
                cycle(including: revoking)
            }
            for progress in revoking {
                publisher.buffered(left: progress.revoke(weighing: ResultPublisher.bufferedWeight(of:)))
                if let share = batch.removeValue(forKey: ObjectIdentifier(progress)) {
                    publisher.buffered(left: ResultPublisher.bufferedWeight(of: share.outputs))
                }
            }
            control.withLock { $0.completedCycles = max($0.completedCycles, ticket) }
            if stopping { return }
            usleep(1000)  // the committer's own thread: waits for the next interval or request
        }
    }

    /// `rd_kafka_init_transactions`, retried while the error is retriable and the pipeline runs.
    /// Each call waits at most a second (a call that timed out is resumed by the next), so a
    /// stop or the shutdown's deadline is noticed while the coordinator cannot be reached.
    private func initialize() -> Bool {
        var calls = 0
        while !isFailed(), !control.withLock({ $0.stopRequested }), !isOutOfTime {
            do {
                try producer.initTransactions(timeoutMilliseconds: min(callTimeoutMilliseconds, 1_000))
                return true
            } catch {
                guard error.isRetriable, !error.isFatal else {
                    onFatal(describeFatal(error, action: "initialising transactions"))
                    return false
                }
                // The first failure, then one line per half minute, not one per call.
                if calls % 30 == 0 {
                    logger.warning("initialising transactions failed; retrying", metadata: ["error": error.description])
                }
                calls += 1
            }
        }
        return false
    }

    /// Takes what the partitions (and `leaving`) released and commits the batch in one transaction.
    private func cycle(including leaving: [PartitionProgress] = []) {
        preconditionOnCommitterThread()
        guard !isFailed() else { return }
        for progress in partitions() + leaving {
            guard let release = progress.takeReleased() else { continue }
            let key = ObjectIdentifier(progress)
            if var share = batch[key] {
                share.outputs += release.outputs
                share.nextOffset = release.nextOffset
                batch[key] = share
            } else {
                batch[key] = Share(progress: progress, outputs: release.outputs, nextOffset: release.nextOffset)
            }
        }
        // A revocation does not wait out a failed batch's backoff when the batch holds some of the
        // leaving partitions' work: the rebalance waits for this cycle, and that work would
        // otherwise be dropped, and sent to APNs again by their new owner. Such an early attempt
        // does not count against `maxAttempts`. (After the shutdown's deadline, nothing is tried.)
        let backedOff = Timestamp.monotonicNanoseconds() < retryNotBefore
        let early = backedOff && retryNotBefore != .max && leaving.contains { batch[ObjectIdentifier($0)] != nil }
        guard !batch.isEmpty, !backedOff || early else { return }
        let shares = Array(batch.values)
        let outputCount = shares.reduce(0) { $0 + $1.outputs.count }
        do {
            try commit(shares)
            batch.removeAll(keepingCapacity: true)
            failedAttempts = 0
            publisher.buffered(left: shares.reduce(0) { $0 + ResultPublisher.bufferedWeight(of: $1.outputs) })
            statistics.withLock { $0.transactions += 1 }
            for share in shares {
                share.progress.committed(nextOffset: share.nextOffset)
            }
            // The same offsets committed plainly, and at once: redundant where the broker commits
            // transactional offsets, and what keeps progress where it does not (librdkafka's mock
            // cluster). Synchronous, on this thread, so it is answered before the next
            // transaction's offsets are sent: a broker keeps the offset written last, and this
            // one never goes back behind a committed transaction. (The consumer has no
            // auto-commit in this mode: its timer could send an older offset mid-commit.)
            try? consumer.commitSync(shares.map { ($0.progress.topicPartition, nextOffset: $0.nextOffset) })
        } catch {
            handleFailure(error, outputs: outputCount, countsAsAttempt: !early)
        }
    }

    /// The timeout of the next blocking transaction call: `settings.timeoutMilliseconds`, or
    /// the time left until ``limitCalls(toEndBy:)``'s deadline when that is sooner (at least 1 ms).
    private var callTimeoutMilliseconds: Int32 {
        let deadline = callsEndBy.load(ordering: .relaxed)
        guard deadline != .max else { return settings.timeoutMilliseconds }
        let now = Timestamp.monotonicNanoseconds()
        let left = deadline > now ? (deadline - now) / 1_000_000 : 0
        return Int32(clamping: max(1, min(UInt64(settings.timeoutMilliseconds), left)))
    }

    /// Whether ``limitCalls(toEndBy:)``'s deadline has passed.
    private var isOutOfTime: Bool {
        Timestamp.monotonicNanoseconds() >= callsEndBy.load(ordering: .relaxed)
    }

    private func commit(_ shares: [Share]) throws(KafkaError) {
        try producer.beginTransaction()
        for share in shares {
            for output in share.outputs {
                do {
                    // A full queue is waited out within the calls' deadline too (the shutdown's
                    // budget), also when that is set while it waits.
                    try producer.produce(
                        topic: output.topic, key: output.key, value: output.value, headers: output.headers, tag: 0,
                        queueFullGiveUpAt: { callsEndBy.load(ordering: .relaxed) })
                } catch let error as KafkaError {
                    throw error
                } catch {
                    throw KafkaError(code: KafkaError.Code.invalidArgument, message: "\(error)", transactionRequiresAbort: true)
                }
            }
        }
        let offsets = shares.map { ($0.progress.topicPartition, nextOffset: $0.nextOffset) }
        let metadata: KafkaConsumerGroupMetadata
        do {
            metadata = try consumer.groupMetadata()
        } catch let error as KafkaError {
            throw KafkaError(code: error.code, message: error.message, transactionRequiresAbort: true)
        } catch {
            throw KafkaError(code: KafkaError.Code.invalidArgument, message: "\(error)", transactionRequiresAbort: true)
        }
        try producer.sendOffsetsToTransaction(offsets, groupMetadata: metadata, timeoutMilliseconds: callTimeoutMilliseconds)
        try resuming("committing the transaction") { () throws(KafkaError) in
            try producer.commitTransaction(timeoutMilliseconds: callTimeoutMilliseconds)
        }
    }

    /// Runs a commit or abort call, and calls it again while it fails with a retriable error that
    /// needs no abort (at most `settings.maxAttempts` calls). A commit that timed out (a
    /// partition leader unreachable while its records flush) stays in progress in librdkafka,
    /// which refuses any other transaction call until it is called again: aborting it instead
    /// would fail and stop the pipeline.
    private func resuming(_ action: String, _ call: () throws(KafkaError) -> Void) throws(KafkaError) {
        var attempt = 1
        while true {
            do {
                try call()
                return
            } catch {
                guard error.isRetriable, !error.transactionRequiresAbort, !error.isFatal,
                      attempt < settings.maxAttempts, !isFailed(), !isOutOfTime else { throw error }
                attempt += 1
                statistics.withLock { $0.resumed += 1 }
                logger.warning("\(action) did not finish in time; calling it again", metadata: [
                    "error": error.description, "bridge.attempt": "\(attempt)",
                ])
            }
        }
    }

    /// Aborts and schedules the batch again, or stops the pipeline when it cannot go on. An
    /// attempt that does not count (a revocation's, inside a backoff) keeps the backoff as it was.
    private func handleFailure(_ error: KafkaError, outputs: Int, countsAsAttempt: Bool = true) {
        preconditionOnCommitterThread()
        if error.isFatal || error.isFencing || producer.fatalError != nil {
            onFatal(describeFatal(producer.fatalError ?? error, action: "committing a transaction"))
            return
        }
        if isOutOfTime {
            // Stopping, and the shutdown's time is up: nothing more is committed. The batch's
            // offsets stay uncommitted, so its records are read again by the next owner, and the
            // open transaction is aborted by the coordinator (or by the next producer with this
            // transactional id).
            logger.warning("the last transaction did not finish before the shutdown deadline; its outputs stay uncommitted",
                           metadata: ["error": error.description, "bridge.outputs": "\(outputs)"])
            retryNotBefore = .max  // no later cycle tries again
            return
        }
        statistics.withLock { $0.aborted += 1 }
        if countsAsAttempt { failedAttempts += 1 }
        logger.warning("transaction failed; aborting it and producing its batch again", metadata: [
            "error": error.description, "bridge.outputs": "\(outputs)", "bridge.attempt": "\(failedAttempts)",
        ])
        do {
            try resuming("aborting the transaction") { () throws(KafkaError) in
                try producer.abortTransaction(timeoutMilliseconds: callTimeoutMilliseconds)
            }
        } catch where isOutOfTime {
            logger.warning("aborting a transaction did not finish before the shutdown deadline", metadata: ["error": error.description])
            retryNotBefore = .max
            return
        } catch {
            onFatal(describeFatal(error, action: "aborting a transaction"))
            return
        }
        guard countsAsAttempt else { return }
        guard failedAttempts < settings.maxAttempts else {
            onFatal("a transaction failed \(failedAttempts) times in a row; last error: \(error)")
            return
        }
        let backoff = UInt64(settings.retryBackoff.totalNanoseconds) << UInt64(min(failedAttempts - 1, 5))
        retryNotBefore = Timestamp.monotonicNanoseconds() + backoff
    }

    /// `batch`, `failedAttempts` and the retry times belong to the committer thread.
    private func preconditionOnCommitterThread() {
        precondition(committerThread.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? false },
                     "TransactionCommitter state used off its thread")
    }

    private func describeFatal(_ error: KafkaError, action: String) -> String {
        if error.isFencing {
            return "this instance was fenced while \(action): another producer uses the same transactional.id "
                + "(each instance needs its own APNS_BRIDGE_INSTANCE_ID): \(error)"
        }
        return "\(action) failed: \(error)"
    }
}
