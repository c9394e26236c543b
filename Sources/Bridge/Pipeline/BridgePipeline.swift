import Kafka
import HTTP2
import Metrics
import Observability
import Synchronization

/// The running bridge: consumes push requests, sends them to APNs and publishes every outcome.
///
/// Threads: the caller of `run()` is the consumer thread (poll, decode, fan-out); the event loop
/// threads carry HTTP/2 and turn answers into result records, which they append to the
/// producer's outbox without waiting; the producer's publisher thread alone calls produce and
/// serves delivery reports, which complete input offsets; the consumer thread stores the grown
/// offsets once per loop iteration for commit (librdkafka commits stored offsets every
/// `auto.commit.interval.ms`, and once more on close).
public final class BridgePipeline: Sendable {
    /// The configuration it runs with, passphrases removed (they were needed to load the keys only).
    public let configuration: BridgeConfiguration
    let logger = Logger(label: "bridge.pipeline")
    let group: EventLoopGroup
    let consumer: KafkaConsumer
    let producer: KafkaProducer
    let publisher: ResultPublisher
    let dispatcher: NotificationDispatcher
    /// Exactly once (`kafka.exactly_once`): the one thread that produces, in transactions.
    let committer: TransactionCommitter?
    let decoder: PushRequestDecoder
    let partitions = Locked<[KafkaTopicPartition: PartitionProgress]>([:])
    /// Counts changes of `partitions` (consumer thread: rebalances run inside its polls), so the
    /// consumer loop knows when a progress it remembered may be stale.
    let assignmentGeneration = Atomic<Int>(0)
    /// At least once: partitions whose committable offset grew, stored by the consumer thread
    /// once per loop iteration (nil exactly once: transactions commit the offsets).
    let offsetStores: OffsetStoreQueue?
    /// Fetching held back by `applyBackpressure`. Consumer thread.
    let fetchHold = Locked(FetchHold())
    /// Partitions paused on their own for too many records behind an unfinished one
    /// (`boundUncommittedSpans`). Consumer thread.
    let spanPausedPartitions = Locked<Set<KafkaTopicPartition>>([])
    /// How many partitions `spanPausedPartitions` holds, read without its lock where every record asks.
    let spanPausedCount = Atomic<Int>(0)
    /// Decides the pauses of `boundUncommittedSpans`. Consumer thread.
    let spanBound: Locked<UncommittedSpanBound<KafkaTopicPartition>>
    private let stopRequested = Atomic<Bool>(false)
    let fetchPauses = Atomic<Int>(0)
    /// Pauses made again for partitions that delivered records while paused (`pauseAgain`).
    let repeatedPauses = Atomic<Int>(0)
    /// At least once, commits of drained revoked partitions' offsets the group refused.
    let handOverCommitsRefused = Atomic<Int>(0)
    /// At least once, commits of drained revoked partitions' offsets not answered within the
    /// hand-over's bound.
    let handOverCommitsTimedOut = Atomic<Int>(0)
    /// Fetching is paused because no APNs endpoint can be reached (`applyBackpressure`).
    let pausedWhileUnreachable = Atomic<Bool>(false)
    let peakInFlightValue = Atomic<Int>(0)
    /// Units of work admitted and not finished: one per token (until its result is acknowledged
    /// by Kafka) or dead letter. One counter, so a token moving from APNs to Kafka is never
    /// counted twice or missed by a reader.
    let workInFlight = Atomic<Int>(0)
    /// Set when the drain is over and the producer closes: outputs purged from then on are
    /// abandoned (their offsets stay uncommitted), not a failure.
    let producerClosing = Atomic<Bool>(false)
    /// Outputs abandoned at close, for the stop's warning.
    let outputsAbandonedAtClose = Atomic<Int>(0)
    let backpressureGraceNanoseconds: UInt64
    private let fatalState = Locked<String?>(nil)
    /// Whether `fatalState` holds a reason: read without the lock where every record asks.
    private let failed = Atomic<Bool>(false)
    /// Every series of `/metrics` (contract §10).
    public let metrics: BridgeMetrics
    /// Whether the consumer is a member of its group: set by an assignment, cleared when its
    /// partitions are lost (the group went on without it, e.g. after its session timed out)
    /// until it is assigned partitions again.
    let joinedGroup = Atomic<Bool>(false)
    /// Whether the consumer has lost its group since it last joined (for `/readyz`'s reason).
    let lostGroup = Atomic<Bool>(false)
    /// Whether `run()` is between its start and its return (for `/healthz`).
    let consuming = Atomic<Bool>(false)
    /// Monotonic time of the consumer loop's last iteration (for `/healthz`).
    let lastConsumerIteration = Atomic<UInt64>(Timestamp.monotonicNanoseconds())
    /// Lag and position by partition from the latest librdkafka statistics (consumer thread
    /// writes, scrapes read).
    let consumerStatistics = Locked(ConsumerLagStatistics.Snapshot())
    /// The latest offsets of paused partitions, for their lag (started by `run()`).
    let lagProbe = Locked<PausedPartitionLagProbe?>(nil)

    /// Builds every component from the configuration; nothing is fetched until `run()`.
    /// - Throws: `PipelineError` naming what could not be set up (a key file, a TLS context, Kafka).
    /// - Parameter backpressureGrace: how long the consumer waits, without taking more records,
    ///   for in-flight work to fall below `limits.max_in_flight` before it pauses the partitions.
    ///   librdkafka drops the records it prefetched for a paused partition and fetches them again
    ///   about half a second after resuming, so a short wait keeps a busy pipeline fed; pausing
    ///   remains the answer to a stall (APNs or Kafka down). Exactly once, half of it is how long
    ///   a partition holds its share of the uncommitted-span bound before it is paused alone.
    public init(configuration: BridgeConfiguration, backpressureGrace: Duration = .seconds(1)) throws(PipelineError) {
        // Passphrases are used by the dispatcher's credential loading below, and kept by nobody.
        self.configuration = configuration.removingPassphrases()
        self.backpressureGraceNanoseconds = backpressureGrace.totalNanoseconds
        self.spanBound = Locked(Self.uncommittedSpanBound(configuration, grace: backpressureGrace))
        self.decoder = PushRequestDecoder(configuration: configuration)
        let metrics = BridgeMetrics(configuration: configuration)
        self.metrics = metrics
        let pipelineBox = PipelineReference()
        // Unusable credentials stop the start before the group is joined (a rebalance for nothing).
        let credentials = try NotificationDispatcher.loadCredentials(configuration)
        do {
            group = try EventLoopGroup(threads: SystemInfo.onlineProcessorCount, name: "apns-loop")
        } catch {
            throw PipelineError(component: "event loops", message: "\(error)")
        }
        let exactlyOnce = configuration.kafka.exactlyOnce
        do {
            producer = try KafkaProducer(
                bootstrapServers: configuration.kafka.brokers,
                properties: configuration.kafka.producer,
                queueCapacity: BridgePipeline.producerQueueCapacity(limits: configuration.limits),
                transactionalID: exactlyOnce ? BridgePipeline.transactionalID(groupID: configuration.kafka.groupID) : nil,
                outputTopics: [configuration.kafka.resultsTopic, configuration.kafka.invalidTokensTopic,
                               configuration.kafka.deadLetterTopic],
                minimumRecordBytes: ResultPublisher.minimumProducerRecordBytes,
                logger: Logger(label: "kafka.producer"),
                deliveryHandler: { tag, error in
                    // Exactly once, a failed delivery fails its transaction, which the committer handles.
                    guard !exactlyOnce else { return }
                    pipelineBox.pipeline?.delivered(tag: tag, error: error)
                }
            )
            consumer = try KafkaConsumer(
                bootstrapServers: configuration.kafka.brokers,
                groupID: configuration.kafka.groupID,
                topics: configuration.kafka.topics,
                properties: Self.consumerProperties(configuration.kafka),
                logger: Logger(label: "kafka.consumer"),
                // Exactly once, offsets go into the transactions; the committer commits the same
                // ones after each transaction, never an older stored one while it commits.
                autoCommit: !exactlyOnce
            )
        } catch {
            group.shutdown()
            throw PipelineError(component: "kafka", message: "\(error)")
        }
        publisher = ResultPublisher(producer: producer, kafka: configuration.kafka, loops: group.loops)
        offsetStores = exactlyOnce ? nil : Self.offsetStoreQueue(consumer: consumer)
        committer = exactlyOnce
            ? TransactionCommitter(
                producer: producer, consumer: consumer, publisher: publisher,
                partitions: { pipelineBox.pipeline?.partitions.withLock { Array($0.values) } ?? [] },
                isFailed: { pipelineBox.pipeline?.fatalReason != nil },
                onFatal: { reason in pipelineBox.pipeline?.fail(reason) })
            : nil
        do {
            dispatcher = try NotificationDispatcher(
                configuration: configuration, credentials: credentials, group: group,
                publisher: MeteredResultSink(sink: publisher, metrics: metrics),
                metrics: metrics)
        } catch {
            producer.close()
            consumer.close()
            group.shutdown()
            throw error
        }
        pipelineBox.set(self)
        consumer.rebalanceHandler = { event in pipelineBox.pipeline?.rebalanced(event) }
        consumer.statisticsHandler = { json in pipelineBox.pipeline?.statisticsArrived(json) }
        registerStateMetrics()
    }

    /// Asks `run()` to stop: it stops fetching, drains in-flight work, commits and returns. Any thread.
    public func requestStop() {
        stopRequested.store(true, ordering: .releasing)
    }

    /// How many times fetching was paused (`apns_bridge_fetch_pauses_total`): at
    /// `limits.max_in_flight`, while no APNs endpoint can be reached, exactly once until the
    /// producer's transactions are initialised, or partitions paused for the records held behind
    /// unfinished ones.
    public var fetchPauseCount: Int {
        fetchPauses.load(ordering: .relaxed)
    }

    /// How many times partitions that delivered records while paused were paused again.
    var repeatedPauseCount: Int {
        repeatedPauses.load(ordering: .relaxed)
    }

    /// At least once, how many commits of drained revoked partitions' offsets the group refused.
    var handOverCommitRefusalCount: Int {
        handOverCommitsRefused.load(ordering: .relaxed)
    }

    /// At least once, how many commits of drained revoked partitions' offsets went unanswered
    /// within the hand-over's bound.
    var handOverCommitTimeoutCount: Int {
        handOverCommitsTimedOut.load(ordering: .relaxed)
    }

    var isStopRequested: Bool {
        stopRequested.load(ordering: .acquiring)
    }

    /// The transactional id of this instance in exactly-once mode: `<group_id>.<instance>`, where
    /// the instance is `$APNS_BRIDGE_INSTANCE_ID` or the host name. Stable across restarts, so a
    /// restarted instance fences its previous incarnation and aborts the transaction it left open
    /// at once; distinct per instance, since offsets are sent with the consumer's group metadata
    /// and the group coordinator fences a member that lost its partitions (KIP-447).
    static func transactionalID(groupID: String) -> String {
        "\(groupID).\(SystemInfo.instanceID)"
    }

    /// Records a fatal error; `run()` stops and returns 1. Unfinished offsets stay uncommitted.
    func fail(_ reason: String) {
        let first = fatalState.withLock { state -> Bool in
            guard state == nil else { return false }
            state = reason
            failed.store(true, ordering: .releasing)
            return true
        }
        if first {
            publisher.stopPublishing()
            logger.error("pipeline stopping after a fatal error", metadata: ["error": reason])
        }
    }

    var fatalReason: String? {
        fatalState.withLock { $0 }
    }

    /// Whether a fatal error was recorded (`fatalReason` is set); no lock.
    var hasFailed: Bool {
        failed.load(ordering: .acquiring)
    }

    /// Whether, after ``run()`` returned, librdkafka still closes the consumer on a thread of its
    /// own (the group coordinator did not answer within `shutdown_timeout`).
    public var isConsumerClosingInBackground: Bool {
        consumer.isClosingInBackground
    }

    /// Notifications waiting for APNs plus results and dead letters waiting for Kafka's acknowledgement.
    public var inFlightCount: Int {
        inFlight
    }

    /// Partitions currently assigned to this member.
    public var assignedPartitionCount: Int {
        partitions.withLock { $0.count }
    }

    /// Assigned partitions whose fetching is paused by backpressure.
    public var pausedPartitionCount: Int {
        fetchHold.withLock { $0.partitions.count }
    }

    /// Assigned partitions paused for too many records behind an unfinished one.
    public var spanPausedPartitionCount: Int {
        spanPausedPartitions.withLock { $0.count }
    }

    /// The most records any assigned partition holds consumed and not yet committable.
    public var largestUncommittedSpan: Int {
        partitions.withLock { $0.values.map(\.pendingCount).max() ?? 0 }
    }

    /// The records all assigned partitions together hold consumed and not yet committable.
    public var uncommittedRecordCount: Int {
        partitions.withLock { $0.values.reduce(0) { $0 + $1.pendingCount } }
    }

    /// Notifications handed to APNs and not answered yet.
    public var notificationsAwaitingAPNs: Int {
        dispatcher.inFlight
    }

    /// Results and dead letters handed to the producer and not acknowledged by Kafka yet.
    public var outputsAwaitingKafka: Int {
        publisher.pendingCount
    }

    /// The most in-flight work seen since start: at most `limits.max_in_flight` plus one request.
    public var peakInFlight: Int {
        peakInFlightValue.load(ordering: .relaxed)
    }

    /// librdkafka's queue bound, from `limits.max_in_flight`: room for every output the work in
    /// flight can cause (a result and an invalid-token record per notification, the limit may be
    /// passed by one request), so queue-full is rare and, when it happens (a lowered
    /// `queue.buffering.max.messages`, a huge dead letter), outputs wait in the outbox and count
    /// as in flight: fetching pauses, nothing sleeps.
    static func producerQueueCapacity(limits: LimitsSettings) -> (messages: Int, kilobytes: Int) {
        // Clamped first: configured limits have no upper bound, and this must not overflow.
        let messages = 2 * (min(limits.maxInFlight, 2_000_000) + min(limits.maxTokensPerRequest, 2_000_000)) + 1_000
        // About 1 KB per output, at least 64 MB so a few dead letters of `message.max.bytes` fit.
        return (messages, max(65_536, messages))
    }

    /// The fatal error that stopped (or is stopping) `run()`, if any.
    public var fatalErrorDescription: String? {
        fatalReason
    }
}

/// A weak, late-bound reference that lets callbacks created before the pipeline reach it. Read
/// for every delivery report, so without a lock: the one write comes before `isSet` is raised,
/// and a read looks at the reference only after seeing `isSet`, so no read meets the write.
final class PipelineReference: @unchecked Sendable {
    private weak var stored: BridgePipeline?
    private let isSet = Atomic<Bool>(false)

    var pipeline: BridgePipeline? {
        isSet.load(ordering: .acquiring) ? stored : nil
    }

    /// Binds the pipeline; once only.
    func set(_ pipeline: BridgePipeline) {
        // invariant: `init` binds its own reference once, before anything reads it.
        precondition(!isSet.load(ordering: .relaxed), "PipelineReference bound twice")
        stored = pipeline
        isSet.store(true, ordering: .releasing)
    }
}
