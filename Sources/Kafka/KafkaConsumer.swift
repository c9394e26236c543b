#if canImport(Glibc)
import Glibc
#endif
import CRdKafka
import Observability
import Synchronization

/// A member of a Kafka consumer group that stores offsets explicitly (at-least-once).
///
/// Threading: one thread owns the consumer and calls ``poll(maxMessages:timeoutMilliseconds:)``,
/// ``commitSync()`` and ``close()``; ``storeOffsets(_:)``, ``pause(_:)``, ``resume(_:)`` and
/// ``assignment()`` may be called from any thread.
public final class KafkaConsumer: @unchecked Sendable {
    enum Phase {
        case open, closing, closed
    }

    let client: RDKafkaClient
    let logger: Logger
    /// Guards the phase; calls from any thread run their (non-blocking) C call under it, so
    /// `close` cannot destroy the handle under them.
    let phase = Locked(Phase.open)
    /// Blocking calls from other threads in progress (``watermarks(of:timeoutMilliseconds:)``):
    /// taken under `phase` while open, and waited out by `close` before it uses the handle.
    let blockingCalls = Atomic<Int>(0)
    private let closingInBackground = Locked(false)
    /// The last topic handle seen by `poll` and its name. No runtime exclusivity check (one per
    /// record): polling thread only, and its one mutating method calls out to nothing.
    @exclusivity(unchecked) private var topicNames = TopicNameCache()

    /// Whether librdkafka commits stored offsets on its own timer (`enable.auto.commit`).
    public let commitsAutomatically: Bool

    /// Joins `groupID` and subscribes to `topics`.
    ///
    /// Sets `enable.auto.offset.store=false`, `partition.assignment.strategy=cooperative-sticky`,
    /// `auto.offset.reset=earliest`, `enable.auto.commit` as `autoCommit` says (when true,
    /// librdkafka commits the offsets stored with ``storeOffsets(_:)`` every
    /// `auto.commit.interval.ms`) and `enable.partition.eof=false`,
    /// `isolation.level=read_committed`; `properties` are applied after them and may not set
    /// any of these (``KafkaPropertyRules``).
    ///
    /// A consumer whose offsets go into a producer's transactions needs `autoCommit: false`: a
    /// plain commit of an older stored offset sent while a transaction is committing would be
    /// written after the transaction's offsets, and a broker keeps the later one.
    /// - Throws: ``KafkaError`` naming a rejected or reserved property (never its value).
    public init(
        bootstrapServers: String, groupID: String, topics: [String], properties: [String: String], logger: Logger,
        autoCommit: Bool = true
    ) throws {
        commitsAutomatically = autoCommit
        client = try Self.makeClient(
            bootstrapServers: bootstrapServers, groupID: groupID, properties: properties, autoCommit: autoCommit, logger: logger)
        self.logger = logger
        // Everything (rebalances, errors, logs forwarded by librdkafka) is served by consumer_poll.
        let redirect = rd_kafka_poll_set_consumer(client.pointer)
        guard redirect == RD_KAFKA_RESP_ERR_NO_ERROR else {
            abandon()
            throw KafkaError(redirect, context: "rd_kafka_poll_set_consumer")
        }
        if !topics.isEmpty {
            let subscription = RDKafkaTopicPartitionList(
                topics.map { KafkaTopicPartition(topic: $0, partition: apnsb_rd_kafka_partition_ua()) })
            let result = rd_kafka_subscribe(client.pointer, subscription.pointer)
            guard result == RD_KAFKA_RESP_ERR_NO_ERROR else {
                _ = rd_kafka_consumer_close(client.pointer)
                abandon()
                throw KafkaError(result, context: "subscribe to \(topics.joined(separator: ","))")
            }
        }
    }

    /// Destroys the client of a consumer whose start failed. Every stored property is set by
    /// then, so the object is released normally and `deinit` runs `close`: the phase makes
    /// that `close` return before it touches the destroyed handle.
    private func abandon() {
        phase.withLock { $0 = .closed }
        client.destroy()
    }

    /// Creates the client (it connects to nothing before it is subscribed, and nowhere without
    /// `bootstrapServers`): the bridge's settings, then `properties`, then the checks only the
    /// whole configuration allows (librdkafka's own in `rd_kafka_new`, and a periodic commit
    /// when `autoCommit` relies on it).
    /// - Throws: ``KafkaError`` naming a reserved or refused property, or librdkafka's reason.
    static func makeClient(
        bootstrapServers: String?, groupID: String, properties: [String: String], autoCommit: Bool, logger: Logger,
        extra: [(name: String, value: String)] = []
    ) throws -> RDKafkaClient {
        try KafkaPropertyRules.validate(properties, for: .consumer)
        let enforced: [(name: String, value: String)] = (bootstrapServers.map { [("bootstrap.servers", $0)] } ?? []) + [
            ("group.id", groupID),
            ("enable.auto.offset.store", "false"),
            ("partition.assignment.strategy", "cooperative-sticky"),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", autoCommit ? "true" : "false"),
            ("enable.partition.eof", "false"),
            ("isolation.level", "read_committed"),
        ]
        let passedThrough = properties.sorted(by: { $0.key < $1.key }).map { (name: $0.key, value: $0.value) }
        let client = try RDKafkaClient(
            kind: .consumer, properties: enforced + passedThrough + extra, context: RDKafkaClientContext(logger: logger))
        // Read back as librdkafka parsed it, whatever the spelling ("00", " 0").
        if autoCommit && client.effectiveProperty("auto.commit.interval.ms") == "0" {
            client.destroy()
            throw KafkaError.configuration(
                "Kafka consumer property \"auto.commit.interval.ms\" cannot be 0: it turns off the periodic commits of processed offsets")
        }
        return client
    }

    /// Checks the settings a consumer of `groupID` would run with, as librdkafka checks them
    /// when it creates the client, without a broker address: nothing connects, and the client
    /// is destroyed at once. `apns-bridge check` and `run` use it, so that settings librdkafka
    /// only refuses together are found before the group is joined.
    /// - Throws: ``KafkaError`` naming a reserved or refused property, or librdkafka's reason.
    public static func checkSettings(groupID: String, properties: [String: String], autoCommit: Bool) throws {
        guard let quiet = KafkaPropertyRules.checkableOffline(properties) else {
            return try KafkaPropertyRules.validate(properties, for: .consumer)
        }
        let client = try makeClient(bootstrapServers: nil, groupID: groupID, properties: quiet, autoCommit: autoCommit,
                                    logger: Logger(label: "kafka.check"), extra: KafkaPropertyRules.offlineCheckExtras)
        client.destroy()
    }

    deinit {
        close()
    }

    /// Called on the polling thread inside ``poll(maxMessages:timeoutMilliseconds:)`` (and
    /// ``close()``): before partitions are unassigned for `.revoked`/`.lost`, and just before
    /// they are assigned for `.assigned` (so ``pause(_:)`` of them there holds from their first
    /// fetch). Keep it short; it may call ``storeOffsets(_:)``.
    public var rebalanceHandler: (@Sendable (KafkaRebalanceEvent) -> Void)? {
        get { client.context.rebalanceHandler.withLock { $0 } }
        set { client.context.rebalanceHandler.withLock { $0 = newValue } }
    }

    /// Called on the polling thread inside ``poll(maxMessages:timeoutMilliseconds:)`` with
    /// librdkafka's statistics JSON, every `statistics.interval.ms` (a property; 0, the default,
    /// turns statistics off). Keep it short.
    public var statisticsHandler: (@Sendable ([UInt8]) -> Void)? {
        get { client.context.statisticsHandler.withLock { $0 } }
        set { client.context.statisticsHandler.withLock { $0 = newValue } }
    }

    /// Returns up to `maxMessages` records: waits up to `timeoutMilliseconds` for the first, then
    /// takes only what is already fetched. Serves rebalances and errors meanwhile; records of
    /// partitions revoked or lost during this call are left out (nothing was stored for them).
    ///
    /// `rd_kafka_consume_batch_queue` was not used: in librdkafka 2.0.2 it waits for the whole
    /// timeout unless the batch fills, which delays small batches.
    /// - Throws: ``KafkaError`` when the consumer is closed or hit a fatal error; transient
    ///   errors (broker down, unknown topic) are logged and skipped.
    public func poll(maxMessages: Int, timeoutMilliseconds: Int32) throws -> [KafkaMessage] {
        var messages: [KafkaMessage] = []
        messages.reserveCapacity(min(maxMessages, 1024))
        let revoked = try pollRecords(maxMessages: maxMessages, timeoutMilliseconds: timeoutMilliseconds) {
            messages.append($0.message())
        }
        if !revoked.isEmpty {
            // Revoked after their records were fetched: their new owner consumes them again from
            // the committed offset.
            let gone = Set(revoked)
            messages.removeAll { gone.contains(KafkaTopicPartition(topic: $0.topic, partition: $0.partition)) }
        }
        return messages
    }

    /// Hands up to `maxMessages` records to `body` one by one, as librdkafka holds them (see
    /// ``KafkaPolledRecord``: valid only during the call, key and headers read only when
    /// copied), with the timing of ``poll(maxMessages:timeoutMilliseconds:)``. A record of a
    /// partition revoked or lost earlier in this call is skipped; `body` may see a record whose
    /// partition is revoked later in the call, exactly as it sees those of earlier calls.
    /// - Returns: how many records `body` was given.
    /// - Throws: as ``poll(maxMessages:timeoutMilliseconds:)``, after `body` saw the records
    ///   that came before the error.
    @discardableResult
    public func poll(maxMessages: Int, timeoutMilliseconds: Int32,
                     handling body: (borrowing KafkaPolledRecord) -> Void) throws -> Int {
        var handed = 0
        // The revoked partitions matter only to `poll`'s other form; this one reports none.
        _ = try pollRecords(maxMessages: maxMessages, timeoutMilliseconds: timeoutMilliseconds) { record in
            handed += 1
            body(record)
        }
        return handed
    }

    /// The loop of both polls: returns the partitions revoked or lost during the call.
    private func pollRecords(maxMessages: Int, timeoutMilliseconds: Int32,
                             _ body: (borrowing KafkaPolledRecord) -> Void) throws -> [KafkaTopicPartition] {
        guard phase.withLock({ $0 == .open }) else { throw KafkaError.closed("Kafka consumer") }
        _ = client.context.revokedDuringPoll.takeAll()
        var timeout = timeoutMilliseconds
        var handed = 0
        while handed < maxMessages {
            guard let message = rd_kafka_consumer_poll(client.pointer, timeout) else { break }
            timeout = 0
            defer { rd_kafka_message_destroy(message) }
            let code = message.pointee.err
            guard code == RD_KAFKA_RESP_ERR_NO_ERROR else {
                if code == RD_KAFKA_RESP_ERR__FATAL {
                    throw client.pendingFatalError() ?? KafkaError(code)
                }
                let reason = client.context.redacting(rd_kafka_message_errstr(message).map { String(cString: $0) } ?? "")
                logger.warning("consumer error", metadata: [
                    "error": KafkaError.name(of: code.rawValue), "reason": reason,
                    "partition": "\(message.pointee.partition)",
                ])
                continue
            }
            let record = KafkaPolledRecord(message, topic: topicNames.name(of: message))
            guard !client.context.revokedDuringPoll.contains(record.topicPartition) else { continue }
            handed += 1
            body(record)
        }
        if let fatal = client.context.fatalError.withLock({ $0 }) {
            throw fatal
        }
        return client.context.revokedDuringPoll.takeAll()
    }

    /// Commits the stored offsets, leaves the group (revocations reach ``rebalanceHandler``)
    /// and destroys the consumer, all within `timeoutMilliseconds`. Idempotent; call from the
    /// polling thread or after it stopped.
    ///
    /// With the group coordinator unreachable, librdkafka would hold a synchronous commit, and
    /// its own close (which commits again with auto commit on), for up to `session.timeout.ms`
    /// each: both are started asynchronously here and waited for until the deadline at most.
    /// Offsets not committed by then stay uncommitted, and the group's next owner of their
    /// partitions reads those records again (at least once).
    public func close(timeoutMilliseconds: Int = 10_000) {
        let shouldClose = phase.withLock { phase -> Bool in
            guard phase == .open else { return false }
            phase = .closing
            return true
        }
        guard shouldClose else { return }
        let deadline = Timestamp.monotonicNanoseconds() + UInt64(max(0, timeoutMilliseconds)) * 1_000_000
        while blockingCalls.load(ordering: .acquiring) > 0 {
            usleep(1000)  // a call has its own timeout; none starts once the phase left `.open`
        }
        commitStoredOffsets(until: deadline)
        leaveAssignment(timeoutMilliseconds: Self.millisecondsLeft(until: deadline))
        closeGroupMembership(until: deadline)
        phase.withLock { $0 = .closed }
    }

    /// The final commit of the stored offsets, waited for until `deadline` at most.
    private func commitStoredOffsets(until deadline: UInt64) {
        let result = commitWaiting(nil, until: deadline)
        switch result.code {
        case RD_KAFKA_RESP_ERR_NO_ERROR, RD_KAFKA_RESP_ERR__NO_OFFSET:
            return
        case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
            logger.warning("final offset commit not confirmed in time; unless it lands after the stop, the offsets stay uncommitted")
        default:
            let failure = result.partitionFailures ?? KafkaError(result.code)
            logger.warning("final offset commit failed", metadata: ["error": failure.description])
        }
    }

    /// librdkafka's close (leaving the group), its callbacks served here until `deadline`, then
    /// the client destroyed. What has not finished by then goes on on a thread of its own,
    /// without the rebalance handler (the owner has stopped), and destroys the client when done.
    private func closeGroupMembership(until deadline: UInt64) {
        guard let queue = rd_kafka_queue_new(client.pointer) else {
            client.destroy()
            return
        }
        if let error = rd_kafka_consumer_close_queue(client.pointer, queue) {
            logger.warning("consumer close failed", metadata: ["error": KafkaError(rd_kafka_error_code(error)).description])
            rd_kafka_error_destroy(error)
            rd_kafka_queue_destroy(queue)
            client.destroy(skippingConsumerClose: true)
            return
        }
        while rd_kafka_consumer_closed(client.pointer) == 0 {
            let left = Self.millisecondsLeft(until: deadline)
            guard left > 0 else {
                finishClosingInBackground(queue)
                return
            }
            _ = rd_kafka_queue_poll_callback(queue, Int32(min(left, 50)))
        }
        rd_kafka_queue_destroy(queue)
        client.destroy()
    }

    /// Serves the close's queue on a thread of its own until librdkafka has closed the consumer
    /// (with the group coordinator unreachable, when its session times out), then destroys it.
    private func finishClosingInBackground(_ queue: OpaquePointer) {
        logger.warning("leaving the consumer group goes on after the stop (the group coordinator does not answer)")
        client.context.rebalanceHandler.withLock { $0 = nil }
        closingInBackground.withLock { $0 = true }
        let client = client
        let queue = CloseQueue(pointer: queue)
        let closing = closingInBackground
        do {
            try NativeThread(name: "kafka consumer close") {
                while rd_kafka_consumer_closed(client.pointer) == 0 {
                    _ = rd_kafka_queue_poll_callback(queue.pointer, 100)
                }
                rd_kafka_queue_destroy(queue.pointer)
                client.destroy()
                closing.withLock { $0 = false }
            }.detach()
        } catch {
            // No thread: the handle is left to the process's exit rather than waited for here.
            logger.warning("consumer close left unfinished", metadata: ["error": "\(error)"])
        }
    }

    /// Whether librdkafka's close of this consumer goes on after ``close(timeoutMilliseconds:)``
    /// returned (the group coordinator did not answer in time): a process that exits now leaves
    /// it to the group's session timeout.
    public var isClosingInBackground: Bool {
        closingInBackground.withLock { $0 }
    }

    private static func millisecondsLeft(until deadline: UInt64) -> Int {
        let now = Timestamp.monotonicNanoseconds()
        return deadline > now ? Int((deadline - now) / 1_000_000) : 0
    }

    /// Unsubscribes and polls until the revocation was served and nothing is assigned (or
    /// `timeoutMilliseconds` passed). Records polled meanwhile are dropped unprocessed.
    ///
    /// librdkafka 2.0.2 can hang in `rd_kafka_consumer_close` (inside the final revocation's
    /// `rd_kafka_incremental_unassign`) when a cooperative rebalance is in progress at close;
    /// seen once in this module's tests, matching librdkafka #4527 (fixed in 2.4.0). Giving up
    /// the assignment through the normal poll path first, as suggested there, avoids that state.
    private func leaveAssignment(timeoutMilliseconds: Int) {
        let unsubscribed = rd_kafka_unsubscribe(client.pointer)
        guard unsubscribed == RD_KAFKA_RESP_ERR_NO_ERROR else {
            logger.warning("unsubscribe failed", metadata: ["error": KafkaError(unsubscribed).description])
            return
        }
        let deadline = Timestamp.monotonicNanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        var dropped = 0
        while Timestamp.monotonicNanoseconds() < deadline {
            if let message = rd_kafka_consumer_poll(client.pointer, 50) {
                if message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR { dropped += 1 }
                rd_kafka_message_destroy(message)
                continue
            }
            var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
            let result = rd_kafka_assignment(client.pointer, &list)
            let assigned = list.map { Int($0.pointee.cnt) } ?? 0
            list.map { rd_kafka_topic_partition_list_destroy($0) }
            if result != RD_KAFKA_RESP_ERR_NO_ERROR || assigned == 0 { break }
        }
        if dropped > 0 {
            logger.debug("records dropped at close; they will be consumed again", metadata: ["records": "\(dropped)"])
        }
    }
}

/// The close's queue, handed to the thread that serves it.
private struct CloseQueue: @unchecked Sendable {
    let pointer: OpaquePointer
}
