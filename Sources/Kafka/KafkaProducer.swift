#if canImport(Glibc)
import Glibc
#endif
import CRdKafka
import Observability
import Synchronization

/// An idempotent (`acks=all`) Kafka producer whose delivery reports go to one handler, keyed
/// by the caller's 64-bit tag.
///
/// Threads that must never wait (event loops) call ``produceNow(_:)``, which hands a record to
/// librdkafka at once when nothing waits in the outbox and its queue has room, else
/// ``enqueue(_:wakingPublisher:)``, which appends to an outbox and returns; one publisher thread
/// hands the outbox to librdkafka and serves every delivery report.
/// ``produce(topic:key:value:headers:tag:)`` is the synchronous form for tools and tests.
/// `deliveryHandler` is called exactly once per record taken (also for records purged or left
/// unproduced at ``close()``, and records librdkafka refused, with an error):
/// on the publisher thread, except for records still unproduced at ``close()`` (on the closing
/// thread) and records enqueued after it (on the enqueuing thread). It must be quick,
/// thread-safe and must not block.
public final class KafkaProducer: @unchecked Sendable {
    let client: RDKafkaClient
    private let outbox: ProducerOutbox
    private let wakeUp: WakeUpPipe
    private var publisher: ProducerPublisherThread!
    private let deliveryHandler: @Sendable (UInt64, KafkaError?) -> Void
    private let logger: Logger
    /// The `rd_kafka_t`, for the produce path.
    var clientPointer: OpaquePointer { client.pointer }
    /// Calls using the handle; `close` shuts it and waits for them before destroying.
    private let gate = ClientGate()
    /// The producer's own handles of the topics it was told it writes (`outputTopics`), made at
    /// start and destroyed at `close` before the client. Produced by name, every record made
    /// librdkafka look its topic up under its client's write lock, which its broker threads
    /// read-lock all the time; by handle, it takes a reference count. Immutable: read without a lock.
    private let topicHandles: [(name: String, handle: OpaquePointer)]

    /// The largest record librdkafka accepts: `message.max.bytes` as librdkafka read it (a
    /// configured "0500000" is octal to it, 163,840 bytes).
    public let maximumRecordBytes: Int

    /// How long `produce` waits for room when librdkafka's queue is full before throwing.
    static let queueFullWaitNanoseconds: UInt64 = 30_000_000_000

    /// Creates the producer and starts its delivery-report thread.
    ///
    /// Sets `enable.idempotence=true`, `acks=all` and `linger.ms=5` (and the queue bounds, when
    /// given); `properties` are applied after them and may change anything except the
    /// properties ``KafkaPropertyRules`` reserves (idempotence, acks, `transactional.id`, …).
    /// - Parameters:
    ///   - queueCapacity: `queue.buffering.max.messages` and `queue.buffering.max.kbytes` unless
    ///     `properties` set them; nil keeps librdkafka's defaults.
    ///   - transactionalID: makes the producer transactional (see
    ///     ``initTransactions(timeoutMilliseconds:)``); nil for an idempotent producer.
    ///   - outputTopics: topics the producer writes on its hot path, the busiest first: it keeps a
    ///     handle of each (see `topicHandles`). Records for other topics are produced by name.
    ///   - minimumRecordBytes: the least `message.max.bytes` accepted: the size of the largest
    ///     record the caller must be able to write (0: librdkafka's own minimum).
    ///   - deliveryHandler: called once per message with its tag, and nil or the error.
    /// - Throws: ``KafkaError`` naming a rejected or reserved property (never its value).
    public convenience init(
        bootstrapServers: String,
        properties: [String: String],
        queueCapacity: (messages: Int, kilobytes: Int)? = nil,
        transactionalID: String? = nil,
        outputTopics: [String] = [],
        minimumRecordBytes: Int = 0,
        logger: Logger,
        deliveryHandler: @escaping @Sendable (_ tag: UInt64, _ error: KafkaError?) -> Void
    ) throws {
        try self.init(bootstrapServers: bootstrapServers, properties: properties, queueCapacity: queueCapacity,
                      transactionalID: transactionalID, outputTopics: outputTopics, minimumRecordBytes: minimumRecordBytes,
                      logger: logger, startThread: NativeThread.init, deliveryHandler: deliveryHandler)
    }

    /// The producer of the public initializer, with its delivery-report thread started by
    /// `startThread` (tests pass one that fails).
    init(
        bootstrapServers: String,
        properties: [String: String],
        queueCapacity: (messages: Int, kilobytes: Int)?,
        transactionalID: String?,
        outputTopics: [String],
        minimumRecordBytes: Int = 0,
        logger: Logger,
        startThread: NativeThread.Starter,
        deliveryHandler: @escaping @Sendable (_ tag: UInt64, _ error: KafkaError?) -> Void
    ) throws {
        let context = RDKafkaClientContext(logger: logger, deliveryHandler: deliveryHandler)
        client = try Self.makeClient(bootstrapServers: bootstrapServers, properties: properties, queueCapacity: queueCapacity,
                                     transactionalID: transactionalID, minimumRecordBytes: minimumRecordBytes, context: context)
        // librdkafka's default when the value cannot be read (it always can: the property exists).
        maximumRecordBytes = client.effectiveProperty("message.max.bytes").flatMap { Int($0) } ?? 1_000_000
        var handles: [(name: String, handle: OpaquePointer)] = []
        for name in outputTopics where !handles.contains(where: { $0.name == name }) {
            // nil for a name librdkafka refuses (e.g. over 512 bytes): produced by name, it is
            // refused there with librdkafka's error, like any record.
            if let handle = rd_kafka_topic_new(client.pointer, name, nil) { handles.append((name, handle)) }
        }
        topicHandles = handles
        self.logger = logger
        self.deliveryHandler = deliveryHandler
        do {
            wakeUp = try WakeUpPipe()
        } catch {
            // Some stored properties are not set yet, so there is no `deinit` and no `close`:
            // the handles go here, before the client (which its own `deinit` destroys).
            for (_, handle) in handles { rd_kafka_topic_destroy(handle) }
            throw error
        }
        outbox = ProducerOutbox(shardCount: 16, wakeUp: wakeUp)
        do {
            publisher = try ProducerPublisherThread(
                client: client, outbox: outbox, wakeUp: wakeUp, startThread: startThread,
                produceOne: { [unowned self] record in
                    self.produceOnce(topic: record.topic, key: record.key, value: record.value, headers: record.headers, tag: record.tag)
                },
                fail: { record, error in deliveryHandler(record.tag, error) }
            )
        } catch {
            // Every stored property is set (`publisher` to nil), so the object is released
            // normally and `deinit` runs `close`. Closed here first, it destroys the handles and
            // the client once; `deinit`'s call then returns at once.
            close(flushTimeoutMilliseconds: 0)
            throw error
        }
    }

    /// Creates the client (it connects nowhere without `bootstrapServers`): the bridge's
    /// settings, then `properties`, then `extra`; librdkafka checks the whole in `rd_kafka_new`.
    /// - Throws: ``KafkaError`` naming a reserved or refused property, or librdkafka's reason.
    static func makeClient(
        bootstrapServers: String?, properties: [String: String], queueCapacity: (messages: Int, kilobytes: Int)?,
        transactionalID: String?, minimumRecordBytes: Int = 0, context: RDKafkaClientContext,
        extra: [(name: String, value: String)] = []
    ) throws -> RDKafkaClient {
        try KafkaPropertyRules.validate(properties, for: .producer)
        var enforced: [(name: String, value: String)] = (bootstrapServers.map { [("bootstrap.servers", $0)] } ?? []) + [
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "5"),
        ]
        if let queueCapacity {
            enforced.append(("queue.buffering.max.messages", "\(min(10_000_000, max(1, queueCapacity.messages)))"))
            enforced.append(("queue.buffering.max.kbytes", "\(min(2_147_483_647, max(1, queueCapacity.kilobytes)))"))
        }
        if let transactionalID {
            enforced.append(("transactional.id", transactionalID))
        }
        let passedThrough = properties.sorted(by: { $0.key < $1.key }).map { (name: $0.key, value: $0.value) }
        let client = try RDKafkaClient(kind: .producer, properties: enforced + passedThrough + extra, context: context)
        // Read back as librdkafka parsed it (strtol: "0500000" is octal).
        guard let recordBytes = client.effectiveProperty("message.max.bytes").flatMap({ Int($0) }) else { return client }
        // librdkafka answers "queue full" to a record larger than the queue's byte bound however
        // empty the queue is: one dead letter of `message.max.bytes` would wait for room forever,
        // and every output after it (the outbox keeps their order) with it.
        if let kilobytes = client.effectiveProperty("queue.buffering.max.kbytes").flatMap({ Int($0) }), kilobytes * 1024 < recordBytes {
            client.destroy()
            throw KafkaError.configuration("""
                Kafka producer property "queue.buffering.max.kbytes" (\(kilobytes)) must hold one record of \
                message.max.bytes (\(recordBytes) bytes), so at least \((recordBytes + 1023) / 1024): a record that \
                large is never accepted into a smaller queue
                """)
        }
        // A record the caller must write that librdkafka refuses as too large would stop the
        // caller at the same record after every restart: refused here, before anything runs.
        if recordBytes < minimumRecordBytes {
            client.destroy()
            throw KafkaError.configuration("""
                Kafka producer property "message.max.bytes" (\(recordBytes)) must be at least \(minimumRecordBytes): \
                the largest records this producer writes need that room
                """)
        }
        return client
    }

    /// Checks the settings a producer would run with, as librdkafka checks them when it creates
    /// the client (e.g. `max.in.flight.requests.per.connection` above 5 with idempotence), without
    /// a broker address: nothing connects, and the client is destroyed at once.
    /// - Throws: ``KafkaError`` naming a reserved or refused property, or librdkafka's reason.
    public static func checkSettings(
        properties: [String: String], queueCapacity: (messages: Int, kilobytes: Int)?, transactionalID: String?,
        minimumRecordBytes: Int = 0
    ) throws {
        let checked: [String: String]
        if let quiet = KafkaPropertyRules.checkableOffline(properties) {
            checked = quiet
        } else {
            // Property by property, and the record and queue sizes on a client made of them alone.
            try KafkaPropertyRules.validate(properties, for: .producer)
            checked = properties.filter { $0.key == "message.max.bytes" || $0.key == "queue.buffering.max.kbytes" }
        }
        let client = try makeClient(bootstrapServers: nil, properties: checked, queueCapacity: queueCapacity,
                                    transactionalID: transactionalID, minimumRecordBytes: minimumRecordBytes,
                                    context: RDKafkaClientContext(logger: Logger(label: "kafka.check")),
                                    extra: KafkaPropertyRules.offlineCheckExtras)
        client.destroy()
    }

    /// Hands a record to the publisher thread and returns at once; never blocks and never calls
    /// librdkafka on the caller's thread. Its delivery report (or the error that kept it from
    /// Kafka, also after ``close()``) reaches the delivery handler exactly once.
    /// - Parameter wakingPublisher: false leaves the publisher thread asleep until the caller's
    ///   next ``wakePublisher()`` (which must follow, e.g. once per event-loop iteration), so that
    ///   many records cost one wake-up; records already taken are never lost, only delayed.
    public func enqueue(_ record: KafkaOutboundRecord, wakingPublisher: Bool = true) {
        guard outbox.append(record, wake: wakingPublisher) else {
            deliveryHandler(record.tag, KafkaError.closed("Kafka producer"))
            return
        }
    }

    /// Produces `record` on the calling thread if nothing waits in the outbox and librdkafka's
    /// queue has room, and returns true; otherwise returns false and the caller enqueues it
    /// (``enqueue(_:wakingPublisher:)``), which keeps the records of one thread in order: only
    /// an empty outbox lets a record past it. Never blocks: `rd_kafka_produceva` is called
    /// without `RD_KAFKA_MSG_F_BLOCK` (a full queue returns at once) and with no lock held. For
    /// event loops: a record produced here costs no hand-off to the publisher thread (which
    /// still serves the delivery reports), and its memory is freed on the thread that made it.
    public func produceNow(_ record: KafkaOutboundRecord) -> Bool {
        record.value.withUnsafeBytes {
            produceNow(topic: record.topic, key: record.key, value: $0, headers: record.headers, tag: record.tag)
        }
    }

    /// ``produceNow(_:)`` for a value that is still in scratch memory (librdkafka copies it): a
    /// record produced here needs no array of its own. On false, the caller makes the record and
    /// enqueues it.
    public func produceNow(topic: String, key: [UInt8]?, value: UnsafeRawBufferPointer,
                           headers: [KafkaHeader], tag: UInt64) -> Bool {
        produceNowIfClear {
            KafkaProducer.withOptionalBytes(key) { keyBytes in
                produceOnce(topic: topic, keyBytes: keyBytes, valueBytes: value, headers: .list(headers), tag: tag)
            }
        }
    }

    /// ``produceNow(topic:key:value:headers:tag:)`` for a record with one header, its key and the
    /// header's value read from memory the caller keeps valid during the call (librdkafka copies
    /// them): a record produced here needs no array at all.
    public func produceNow(topic: String, key: UnsafeRawBufferPointer?, value: UnsafeRawBufferPointer,
                           header: (name: String, value: UnsafeRawBufferPointer), tag: UInt64) -> Bool {
        produceNowIfClear {
            produceOnce(topic: topic, keyBytes: key, valueBytes: value, headers: .one(name: header.name, value: header.value),
                        tag: tag)
        }
    }

    /// Runs `produce` when nothing waits in the outbox and the producer is open; true when
    /// librdkafka took the record.
    private func produceNowIfClear(_ produce: () -> ProduceOutcome) -> Bool {
        guard outbox.count == 0 else { return false }
        // Closed, queue full or refused: the caller enqueues it, and the outbox reports or
        // retries it as any record.
        guard case .accepted? = withOpenClient({ _ in produce() }) else { return false }
        return true
    }

    /// Wakes the publisher thread for records enqueued with `wakingPublisher: false`. Any thread,
    /// never blocks (at most one `write(2)` to a pipe).
    public func wakePublisher() {
        outbox.wakePublisherIfWaiting()
    }

    /// Records enqueued and not yet handed to librdkafka (waiting for room in its queue).
    public var outboxCount: Int { outbox.count }

    deinit {
        close()
    }

    /// Queues one record (librdkafka copies key, value and headers).
    ///
    /// When librdkafka's queue is full it waits for room, for at most 30 seconds, and not past
    /// `queueFullGiveUpAt()`.
    /// - Parameter tag: handed back to the delivery handler; it is stored in the message's
    ///   opaque pointer, so no allocation is made per message.
    /// - Throws: ``KafkaError`` when the record is not accepted (closed, queue full for too long,
    ///   unknown topic, fatal producer error); no delivery report follows then.
    /// - Parameters:
    ///   - value: nil produces a null value (a tombstone).
    ///   - partition: nil lets the partitioner choose.
    ///   - timestampMilliseconds: the record's CreateTime; nil for now.
    ///   - queueFullGiveUpAt: while waiting for room, the monotonic time (nanoseconds) after which
    ///     not to wait any more; read again as the wait goes on, so a deadline set meanwhile counts.
    public func produce(
        topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader], tag: UInt64,
        partition: Int32? = nil, timestampMilliseconds: Int64? = nil,
        queueFullGiveUpAt: () -> UInt64 = { .max }
    ) throws {
        var waitDeadline: UInt64?
        while true {
            guard let outcome = gate.whileInside({
                produceOnce(
                    topic: topic, key: key, value: value, headers: headers, tag: tag, partition: partition,
                    timestampMilliseconds: timestampMilliseconds)
            }) else { throw KafkaError.closed("Kafka producer") }
            switch outcome {
            case .accepted:
                return
            case .failed(let error):
                throw error
            case .queueFull:
                let now = Timestamp.monotonicNanoseconds()
                guard let deadline = waitDeadline else {
                    waitDeadline = now + KafkaProducer.queueFullWaitNanoseconds
                    logger.debug("producer queue full; waiting for delivery reports", metadata: ["topic": topic])
                    continue
                }
                guard now < deadline else {
                    throw KafkaError(RD_KAFKA_RESP_ERR__QUEUE_FULL, context: "producer queue stayed full for 30 s")
                }
                guard now < queueFullGiveUpAt() else {
                    throw KafkaError(RD_KAFKA_RESP_ERR__QUEUE_FULL, context: "producer queue still full when the time was up")
                }
                usleep(1000)  // the poll thread serves delivery reports meanwhile
            }
        }
    }

    /// Waits until every enqueued and produced message got its delivery report or
    /// `timeoutMilliseconds` passed. Blocks: never call it on an event loop.
    /// - Returns: true when nothing is left in flight (also after ``close()``).
    public func flush(timeoutMilliseconds: Int32) -> Bool {
        guard gate.enter() else { return true }
        defer { gate.leave() }
        let deadline = Timestamp.monotonicNanoseconds() + UInt64(max(0, timeoutMilliseconds)) * 1_000_000
        while outbox.count > 0 {
            guard Timestamp.monotonicNanoseconds() < deadline else { return false }
            usleep(1000)  // the publisher thread hands the outbox over meanwhile
        }
        let now = Timestamp.monotonicNanoseconds()
        let remaining = Int32(clamping: deadline > now ? (deadline - now) / 1_000_000 : 0)
        return rd_kafka_flush(client.pointer, remaining) == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// The producer's handle of `topic`, if it keeps one (`outputTopics`). Valid only inside the
    /// gate (`withOpenClient`): `close` destroys the handles.
    @inline(__always)
    func topicHandle(_ topic: String) -> OpaquePointer? {
        // A few names, the busiest first, usually the very strings the caller configured: equal
        // strings of the same storage compare at once.
        for entry in topicHandles where entry.name == topic { return entry.handle }
        return nil
    }

    /// Runs `body` with the handle unless the producer is closed; `close` waits for it to return.
    /// For calls that may block (transactions): no lock is held meanwhile.
    func withOpenClient<R>(_ body: (OpaquePointer) -> R) -> R? {
        gate.whileInside { body(client.pointer) }
    }

    /// The fatal error librdkafka raised on this producer (e.g. fenced by another producer with
    /// the same `transactional.id`), if any.
    public var fatalError: KafkaError? {
        withOpenClient { _ in client.pendingFatalError() } ?? nil
    }

    /// Messages handed to librdkafka whose delivery report has not been served yet (0 after close).
    public var inFlightCount: Int {
        gate.whileInside { Int(rd_kafka_outq_len(client.pointer)) } ?? 0
    }

    /// Flushes for up to `flushTimeoutMilliseconds`, purges what is left (those messages get a
    /// delivery report with a purge error), stops the poll thread and destroys the producer.
    /// Idempotent; `produce` throws afterwards.
    public func close(flushTimeoutMilliseconds: Int32 = 10_000) {
        guard gate.beginClosing() else { return }
        while gate.callersInside > 0 {
            usleep(1000)  // a produce call returns at once; a flush within its timeout
        }
        let started = Timestamp.monotonicNanoseconds()
        let deadline = started + UInt64(max(0, flushTimeoutMilliseconds)) * 1_000_000
        // No publisher: its thread never started, and no record was taken.
        let unproduced = (publisher?.stop(deadlineNanoseconds: deadline, wakeUp: wakeUp) ?? []) + outbox.close()
        if !unproduced.isEmpty {
            logger.warning("producer closing with records never handed to Kafka", metadata: ["messages": "\(unproduced.count)"])
            outbox.markRemoved(unproduced.count)
            for record in unproduced {
                deliveryHandler(record.tag, KafkaError.closed("Kafka producer (record not produced before close)"))
            }
        }
        let now = Timestamp.monotonicNanoseconds()
        let remaining = Int32(clamping: deadline > now ? (deadline - now) / 1_000_000 : 0)
        if rd_kafka_flush(client.pointer, remaining) != RD_KAFKA_RESP_ERR_NO_ERROR {
            let left = rd_kafka_outq_len(client.pointer)
            logger.warning("producer closing with undelivered messages; purging them", metadata: ["messages": "\(left)"])
            _ = rd_kafka_purge(client.pointer, apnsb_rd_kafka_purge_queue_and_inflight())
            _ = rd_kafka_flush(client.pointer, 1000)  // serves the purged messages' reports
        }
        // The gate is shut and no call is inside it, so no produce holds a handle any more.
        for (_, handle) in topicHandles { rd_kafka_topic_destroy(handle) }
        client.destroy()
    }
}
