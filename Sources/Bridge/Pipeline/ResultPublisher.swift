import HTTP2
import Kafka
import Observability
import Synchronization

/// Where the dispatcher's results go: Kafka in the pipeline, the terminal for `apns-bridge send`.
protocol ResultSink: Sendable {
    /// Takes one result (contract §3).
    func publishResult(_ result: PushResult, context: RequestContext)
    /// Takes one invalid-token record (contract §4).
    func publishInvalidToken(_ record: InvalidTokenRecord, context: RequestContext)
}

/// Encodes outputs (contract §3–§5) and hands them to librdkafka without waiting
/// (`KafkaProducer.produceNow`) or, when that would mean waiting or passing a record queued
/// before, to the producer's outbox; each holds one count of its input record's
/// `RequestContext` until the delivery report arrives.
///
/// Exactly once (`kafka.exactly_once`), outputs are not handed to the producer here: each is
/// buffered with its input record (no hold, no C call) and the ``TransactionCommitter``
/// produces it in the transaction that commits the record's offset.
///
/// Thread-safe and non-blocking: called from the consumer thread and from every event loop
/// thread, none of which ever waits for room in librdkafka's queue or holds a lock across its
/// produce call.
final class ResultPublisher: ResultSink {
    private let producer: KafkaProducer
    private let resultsTopic: String
    private let invalidTokensTopic: String
    private let deadLetterTopic: String
    private let transactional: Bool
    private let unacknowledged = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    /// Results published on an event loop wake the publisher thread once per iteration (nil:
    /// every record wakes it).
    private let wakeUps: ProducerWakeUps?

    /// The producer's `message.max.bytes` (librdkafka refuses larger records).
    private let maximumRecordBytes: Int

    /// Framing librdkafka counts on top of key, value and headers (record and batch overhead), with room to spare.
    static let recordOverheadBytes = 1024

    /// - Parameter loops: the event loops results are published from (their results wake the
    ///   producer's publisher thread once per loop iteration).
    init(producer: KafkaProducer, kafka: KafkaSettings, loops: [EventLoop] = []) {
        self.wakeUps = loops.isEmpty ? nil : ProducerWakeUps(loops: loops, producer: producer)
        // As librdkafka read the configured value: it parses integers with strtol ("0500000" is
        // octal), so the text of the configuration is not the limit.
        self.maximumRecordBytes = producer.maximumRecordBytes
        self.producer = producer
        self.transactional = kafka.exactlyOnce
        self.resultsTopic = kafka.resultsTopic
        self.invalidTokensTopic = kafka.invalidTokensTopic
        self.deadLetterTopic = kafka.deadLetterTopic
    }

    /// Results and dead letters handed over and not yet acknowledged by Kafka (in the outbox or
    /// in librdkafka's queue), by weight (``RequestContext/outputWeight``: a dead letter counts
    /// one per KiB it carries): part of what backpressure bounds, so a slow or full Kafka pauses
    /// fetching instead of making outputs pile up in memory. An invalid-token record rides along
    /// with its token's result and is not counted again.
    var pendingCount: Int { unacknowledged.load(ordering: .relaxed) }

    /// What a dead letter of `message` weighs in in-flight work: one per KiB of the record it
    /// repeats (key, headers, and the value as the dead letter writes it: escaped, or base64; at
    /// most the producer's `message.max.bytes`), at least 1. A result (under a KiB as a rule,
    /// about 12 KB at the very most) weighs 1.
    func deadLetterWeight(of message: KafkaMessage) -> Int {
        var bytes = (message.key?.count ?? 0) + (message.value.map(ResultRecordEncoder.deadLetterOriginalBytes) ?? 0)
        for header in message.headers { bytes += header.byteCount }
        return 1 + min(bytes, maximumRecordBytes) / ResultPublisher.weightUnitBytes
    }

    /// The bytes of a dead letter that count as one more unit of in-flight work.
    static let weightUnitBytes = 1024

    /// Exactly once: the weight a buffered output was counted with (kept in its `tag`, which the
    /// committer does not hand to librdkafka: it produces every output with tag 0).
    static func bufferedWeight(of output: KafkaOutboundRecord) -> Int {
        max(1, Int(truncatingIfNeeded: output.tag))
    }

    /// Exactly once: the weight of `outputs` together.
    static func bufferedWeight(of outputs: [KafkaOutboundRecord]) -> Int {
        outputs.reduce(0) { $0 + bufferedWeight(of: $1) }
    }

    /// After a fatal error: nothing more is produced. Outputs not produced keep their holds, so
    /// their input offsets stay uncommitted, and no thread waits on a full producer queue.
    func stopPublishing() {
        stopped.store(true, ordering: .releasing)
    }

    /// Publisher thread: Kafka acknowledged (or finally failed) the record produced with `tag`,
    /// an output of `context`.
    func acknowledged(tag: UInt64, context: RequestContext) {
        if RequestContext.countsAsWork(tag) {
            unacknowledged.subtract(context.outputWeight, ordering: .relaxed)
        }
    }

    /// Exactly once: buffered outputs of this total weight (``bufferedWeight(of:)``) left memory
    /// (committed, or dropped with their revoked partition).
    func buffered(left weight: Int) {
        unacknowledged.subtract(weight, ordering: .relaxed)
    }

    /// Publishes one result on the results topic, keyed by the request id. The record is
    /// written into scratch memory and produced from there (librdkafka copies it), its key and
    /// `request-id` header read from the request id's own bytes.
    func publishResult(_ result: PushResult, context: RequestContext) {
        ResultRecordEncoder.withResult(result) { value in
            context.withRequestIDBytes { requestID in
                produce(topic: resultsTopic, fields: .borrowed(key: requestID, requestID: requestID),
                        value: UnsafeRawBufferPointer(value), context: context)
            }
        }
    }

    /// Publishes one invalid-token record, keyed by the token (log-compactable topic).
    func publishInvalidToken(_ record: InvalidTokenRecord, context: RequestContext) {
        var value: [UInt8] = []  // sized by the encoder
        ResultRecordEncoder.appendInvalidToken(record, to: &value)
        var token = record.token
        token.withUTF8 { token in
            value.withUnsafeBytes { value in
                context.withRequestIDBytes { requestID in
                    produce(topic: invalidTokensTopic, fields: .borrowed(key: UnsafeRawBufferPointer(token), requestID: requestID),
                            value: value, context: context, countsAsWork: false)
                }
            }
        }
    }

    /// Publishes an input record that could not become notifications, with its key and headers,
    /// cut to fit the producer's `message.max.bytes` (contract §5): a dead letter Kafka refused
    /// would stop the partition, and the same record would stop it again after every restart.
    func publishDeadLetter(_ deadLetter: DeadLetter, message: KafkaMessage, context: RequestContext) {
        // The original headers as they were, a `request-id` of the producer's too, then ours,
        // last: a reader taking a header's last value (librdkafka's `rd_kafka_header_get_last`,
        // Kafka's `Headers.lastHeader`) gets the bridge's.
        let requestIDHeader = [KafkaHeader(name: "request-id", value: Array(context.requestID.utf8))]
        var headers = message.headers + requestIDHeader
        var key = message.key
        var budget = deadLetterBudget(key: key, headers: headers)
        var value: [UInt8] = []
        if budget < ResultPublisher.minimumDeadLetterBytes {
            // Key and headers alone nearly fill a record (possible only near the limit). When the
            // whole dead letter still fits, it goes as it is (written whole only when its original
            // alone fits: one far past the limit is not escaped just to be measured); otherwise
            // the original headers go first, then the key, so that the value has its room.
            if (message.value.map(ResultRecordEncoder.deadLetterOriginalBytes) ?? 0) <= budget {
                ResultRecordEncoder.appendDeadLetter(deadLetter, source: context.source, original: message.value, to: &value)
            }
            if value.isEmpty || value.count > budget {
                value = []
                headers = requestIDHeader
                budget = deadLetterBudget(key: key, headers: headers)
                if budget < ResultPublisher.minimumDeadLetterBytes {
                    key = nil
                    budget = deadLetterBudget(key: nil, headers: headers)
                }
            }
        }
        if value.isEmpty {
            ResultRecordEncoder.appendDeadLetter(
                deadLetter, source: context.source, original: message.value, maximumBytes: budget, to: &value)
        }
        value.withUnsafeBytes {
            produce(topic: deadLetterTopic, fields: .owned(key: key, headers: headers), value: $0, context: context)
        }
    }

    /// A dead letter's value always has room for its code, detail and source.
    static let minimumDeadLetterBytes = 8 * 1024

    /// The least `message.max.bytes` the bridge runs with: a dead letter's value of
    /// ``minimumDeadLetterBytes`` with its `request-id` header (an `id` of up to 256 characters,
    /// 1 KiB) and the record's framing (about 10.3 KB), and every result and invalid-token
    /// record: a result's value holds an `id` (up to 256 characters), a token
    /// (``InvalidTokenEcho/maximumBytes``), Apple's reason, `apns-id` and `apns-unique-id`
    /// (`APNsResponse.maximumKeptTextBytes` each), all escaped (a control character takes six
    /// bytes), the app's name (``AppSettings/maximumNameBytes``) and the source topic, with the
    /// `id` again as its key and header: about 12 KB at the very most.
    static let minimumProducerRecordBytes = 16 * 1024

    private func deadLetterBudget(key: [UInt8]?, headers: [KafkaHeader]) -> Int {
        var used = ResultPublisher.recordOverheadBytes + (key?.count ?? 0)
        for header in headers {
            used += header.byteCount + 16
        }
        return maximumRecordBytes - used
    }

    /// An output's key and headers.
    private enum OutputFields {
        /// Keyed by `key` with the one header `request-id`: both read from memory valid during
        /// the call (results and invalid-token records).
        case borrowed(key: UnsafeRawBufferPointer, requestID: UnsafeRawBufferPointer)
        /// A key and headers of the output's own (dead letters).
        case owned(key: [UInt8]?, headers: [KafkaHeader])

        /// The key and headers as a record that outlives the call keeps them.
        var owned: (key: [UInt8]?, headers: [KafkaHeader]) {
            switch self {
            case .borrowed(let key, let requestID): (Array(key), [KafkaHeader(name: "request-id", value: Array(requestID))])
            case .owned(let key, let headers): (key, headers)
            }
        }
    }

    /// Hands one output on. Key, value and headers are only read during the call: arrays of them
    /// are made only for a record that is buffered (exactly once) or has to wait in the outbox.
    private func produce(
        topic: String,
        fields: OutputFields,
        value: UnsafeRawBufferPointer,
        context: RequestContext,
        countsAsWork: Bool = true
    ) {
        if transactional {
            guard !stopped.load(ordering: .acquiring) else {
                // Stopped: the output is not buffered, so its record must never count as complete
                // (a transaction would commit its offset without it). A hold never given back.
                context.retain()
                return
            }
            // Counted before the committer can see it (it subtracts it), with its weight in its tag.
            let weight = countsAsWork ? context.outputWeight : 1
            unacknowledged.add(weight, ordering: .relaxed)
            let owned = fields.owned
            if !context.buffer(KafkaOutboundRecord(topic: topic, key: owned.key, value: Array(value), headers: owned.headers,
                                                   tag: UInt64(weight))) {
                unacknowledged.subtract(weight, ordering: .relaxed)
            }
            return
        }
        context.retain()
        // Stopped: the hold just taken is never given back, so the input offset stays uncommitted.
        guard !stopped.load(ordering: .acquiring) else { return }
        if countsAsWork {
            unacknowledged.add(context.outputWeight, ordering: .relaxed)
        }
        // Never blocks: produced here when librdkafka has room and nothing waits before it, else
        // handed to the producer's publisher thread. A record Kafka refuses comes back through
        // the delivery handler with its error, like a failed delivery.
        let tag = context.retainedTag(countsAsWork: countsAsWork)
        let produced = switch fields {
        case .borrowed(let key, let requestID):
            producer.produceNow(topic: topic, key: key, value: value, header: (name: "request-id", value: requestID), tag: tag)
        case .owned(let key, let headers):
            producer.produceNow(topic: topic, key: key, value: value, headers: headers, tag: tag)
        }
        guard !produced else { return }
        let owned = fields.owned
        let record = KafkaOutboundRecord(topic: topic, key: owned.key, value: Array(value), headers: owned.headers, tag: tag)
        let deferred = wakeUps?.deferWakeUp() ?? false
        producer.enqueue(record, wakingPublisher: !deferred)
    }
}
