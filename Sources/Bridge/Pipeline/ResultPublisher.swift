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

/// Encodes outputs (contract §3–§5) and hands them to the producer's outbox, each holding one
/// count of its input record's `RequestContext` until the delivery report arrives.
///
/// Thread-safe and non-blocking: called from the consumer thread and from every event loop
/// thread, none of which ever calls librdkafka or waits for room in its queue.
final class ResultPublisher: ResultSink {
    private let producer: KafkaProducer
    private let resultsTopic: String
    private let invalidTokensTopic: String
    private let deadLetterTopic: String
    private let unacknowledged = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)

    init(producer: KafkaProducer, kafka: KafkaSettings) {
        self.producer = producer
        self.resultsTopic = kafka.resultsTopic
        self.invalidTokensTopic = kafka.invalidTokensTopic
        self.deadLetterTopic = kafka.deadLetterTopic
    }

    /// Output records handed over and not yet acknowledged by Kafka (in the outbox or in
    /// librdkafka's queue): part of what backpressure bounds, so a slow or full Kafka pauses
    /// fetching instead of making results pile up in memory.
    var pendingCount: Int { unacknowledged.load(ordering: .relaxed) }

    /// After a fatal error: nothing more is produced. Outputs not produced keep their holds, so
    /// their input offsets stay uncommitted, and no thread waits on a full producer queue.
    func stopPublishing() {
        stopped.store(true, ordering: .releasing)
    }

    /// Producer thread: Kafka acknowledged (or finally failed) one record.
    func acknowledged() {
        unacknowledged.subtract(1, ordering: .relaxed)
    }

    /// Publishes one result on the results topic, keyed by the request id.
    func publishResult(_ result: PushResult, context: RequestContext) {
        var value: [UInt8] = []
        value.reserveCapacity(384)
        ResultRecordEncoder.appendResult(result, to: &value)
        produce(topic: resultsTopic, key: context.requestIDBytes, value: value, headers: context.requestIDHeader, context: context)
    }

    /// Publishes one invalid-token record, keyed by the token (log-compactable topic).
    func publishInvalidToken(_ record: InvalidTokenRecord, context: RequestContext) {
        var value: [UInt8] = []
        value.reserveCapacity(256)
        ResultRecordEncoder.appendInvalidToken(record, to: &value)
        produce(topic: invalidTokensTopic, key: Array(record.token.utf8), value: value, headers: context.requestIDHeader, context: context)
    }

    /// Publishes an input record that could not become notifications, with its key and headers.
    func publishDeadLetter(_ deadLetter: DeadLetter, message: KafkaMessage, context: RequestContext) {
        var value: [UInt8] = []
        ResultRecordEncoder.appendDeadLetter(deadLetter, source: context.source, original: message.value, to: &value)
        // Our `request-id` replaces one the original may carry, so readers see one value.
        let headers = message.headers.filter { $0.name != "request-id" } + context.requestIDHeader
        produce(topic: deadLetterTopic, key: message.key, value: value, headers: headers, context: context)
    }

    private func produce(
        topic: String,
        key: [UInt8]?,
        value: [UInt8],
        headers: [(name: String, value: [UInt8])],
        context: RequestContext
    ) {
        context.retain()
        // Stopped: the hold just taken is never given back, so the input offset stays uncommitted.
        guard !stopped.load(ordering: .acquiring) else { return }
        unacknowledged.add(1, ordering: .relaxed)
        // Never blocks: the producer's publisher thread hands it to librdkafka. A record Kafka
        // refuses comes back through the delivery handler with its error, like a failed delivery.
        producer.enqueue(KafkaOutboundRecord(topic: topic, key: key, value: value, headers: headers, tag: context.retainedTag()))
    }
}
