#if canImport(Glibc)
import Glibc
#endif
import CRdKafka
import Observability
import Synchronization

/// An idempotent (`acks=all`) Kafka producer whose delivery reports go to one handler, keyed
/// by the caller's 64-bit tag.
///
/// `produce` may be called from any thread. A dedicated thread polls librdkafka and calls
/// `deliveryHandler` exactly once per accepted message (also for messages purged at ``close()``,
/// with an error), so the handler must be quick and thread-safe.
public final class KafkaProducer: @unchecked Sendable {
    private struct State {
        var isOpen = true
        /// `flush` calls running without the lock; `close` waits for them before destroying.
        var activeFlushes = 0
    }

    private let client: RDKafkaClient
    private let pollLoop: RDKafkaPollLoop
    private let logger: Logger
    /// The `rd_kafka_t`, for the produce path.
    var clientPointer: OpaquePointer { client.pointer }
    private let state = Locked(State())

    /// How long `produce` waits for room when librdkafka's queue is full before throwing.
    static let queueFullWaitNanoseconds: UInt64 = 30_000_000_000

    /// Creates the producer and starts its delivery-report thread.
    ///
    /// Sets `enable.idempotence=true`, `acks=all` and `linger.ms=5`; `properties` are applied
    /// after them and may change anything except idempotence, acks and `transactional.id`.
    /// - Parameter transactionalID: makes the producer transactional (see
    ///   ``initTransactions(timeoutMilliseconds:)``); nil for an idempotent producer.
    /// - Parameter deliveryHandler: called once per message with its tag, and nil or the error.
    /// - Throws: ``KafkaError`` naming a rejected property (never its value).
    public init(
        bootstrapServers: String,
        properties: [String: String],
        transactionalID: String? = nil,
        logger: Logger,
        deliveryHandler: @escaping @Sendable (_ tag: UInt64, _ error: KafkaError?) -> Void
    ) throws {
        if properties["transactional.id"] != nil {
            throw KafkaError.configuration(
                "Kafka producer property \"transactional.id\" cannot be set: the bridge derives it (kafka.exactly_once)")
        }
        if let idempotence = properties["enable.idempotence"], idempotence.lowercased() != "true" {
            throw KafkaError.configuration(
                "Kafka producer property \"enable.idempotence\" must stay true (at-least-once delivery)")
        }
        if let acks = properties["acks"] ?? properties["request.required.acks"], acks != "all", acks != "-1" {
            throw KafkaError.configuration("Kafka producer property \"acks\" must stay all (at-least-once delivery)")
        }
        var enforced: [(name: String, value: String)] = [
            ("bootstrap.servers", bootstrapServers),
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "5"),
        ]
        if let transactionalID {
            enforced.append(("transactional.id", transactionalID))
        }
        let passedThrough = properties.sorted(by: { $0.key < $1.key }).map { (name: $0.key, value: $0.value) }
        let context = RDKafkaClientContext(logger: logger, deliveryHandler: deliveryHandler)
        client = try RDKafkaClient(kind: .producer, properties: enforced + passedThrough, context: context)
        pollLoop = try RDKafkaPollLoop(client: client, name: "kafka-producer")
        self.logger = logger
    }

    deinit {
        close()
    }

    /// Queues one record (librdkafka copies key, value and headers).
    ///
    /// When librdkafka's queue is full it waits for room, for at most 30 seconds.
    /// - Parameter tag: handed back to the delivery handler; it is stored in the message's
    ///   opaque pointer, so no allocation is made per message.
    /// - Throws: ``KafkaError`` when the record is not accepted (closed, queue full for too long,
    ///   unknown topic, fatal producer error); no delivery report follows then.
    public func produce(
        topic: String, key: [UInt8]?, value: [UInt8], headers: [(name: String, value: [UInt8])], tag: UInt64
    ) throws {
        var waitDeadline: UInt64?
        while true {
            let outcome = try state.withLock { state throws(KafkaError) -> ProduceOutcome in
                guard state.isOpen else { throw KafkaError.closed("Kafka producer") }
                return produceOnce(topic: topic, key: key, value: value, headers: headers, tag: tag)
            }
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
                usleep(1000)  // the poll thread serves delivery reports meanwhile
            }
        }
    }

    /// Waits until every queued message got its delivery report or `timeoutMilliseconds` passed.
    /// - Returns: true when nothing is left in flight (also after ``close()``).
    public func flush(timeoutMilliseconds: Int32) -> Bool {
        withOpenClient { rd_kafka_flush($0, timeoutMilliseconds) == RD_KAFKA_RESP_ERR_NO_ERROR } ?? true
    }

    /// Runs `body` with the handle unless the producer is closed; `close` waits for it to return.
    /// For calls that may block (flush, transactions): no lock is held meanwhile.
    func withOpenClient<R>(_ body: (OpaquePointer) -> R) -> R? {
        let isOpen = state.withLock { state -> Bool in
            if state.isOpen { state.activeFlushes += 1 }
            return state.isOpen
        }
        guard isOpen else { return nil }
        defer { state.withLock { $0.activeFlushes -= 1 } }
        return body(client.pointer)
    }

    /// The fatal error librdkafka raised on this producer (e.g. fenced by another producer with
    /// the same `transactional.id`), if any.
    public var fatalError: KafkaError? {
        withOpenClient { _ in client.pendingFatalError() } ?? nil
    }

    /// Messages produced whose delivery report has not been served yet (0 after close).
    public var inFlightCount: Int {
        state.withLock { $0.isOpen ? Int(rd_kafka_outq_len(client.pointer)) : 0 }
    }

    /// Flushes for up to `flushTimeoutMilliseconds`, purges what is left (those messages get a
    /// delivery report with a purge error), stops the poll thread and destroys the producer.
    /// Idempotent; `produce` throws afterwards.
    public func close(flushTimeoutMilliseconds: Int32 = 10_000) {
        let shouldClose = state.withLock { state -> Bool in
            defer { state.isOpen = false }
            return state.isOpen
        }
        guard shouldClose else { return }
        while state.withLock({ $0.activeFlushes }) > 0 {
            usleep(1000)
        }
        pollLoop.stop()
        if rd_kafka_flush(client.pointer, flushTimeoutMilliseconds) != RD_KAFKA_RESP_ERR_NO_ERROR {
            let left = rd_kafka_outq_len(client.pointer)
            logger.warning("producer closing with undelivered messages; purging them", metadata: ["messages": "\(left)"])
            _ = rd_kafka_purge(client.pointer, apnsb_rd_kafka_purge_queue_and_inflight())
            _ = rd_kafka_flush(client.pointer, 1000)  // serves the purged messages' reports
        }
        client.destroy()
    }
}
