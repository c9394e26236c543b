import CRdKafka
import Observability
import Synchronization

/// The one thread that calls produce for ``KafkaProducer/enqueue(_:)`` and serves the
/// producer's delivery reports.
///
/// It waits in `poll(2)` on one pipe written to by the outbox (a first record) and by
/// librdkafka (a delivery report or error arrived on the main queue). When librdkafka's queue is
/// full it keeps the records it could not hand over and waits for delivery reports to make room:
/// records pile up in the outbox, which callers see as backpressure (``KafkaProducer/pendingCount``),
/// and nobody sleeps on an event loop.
final class ProducerPublisherThread: Sendable {
    private let stopDeadline = Atomic<UInt64>(0)
    private let thread = Locked<NativeThread?>(nil)
    private let leftovers = Locked<[KafkaOutboundRecord]>([])
    /// librdkafka's main queue handle, touched only at start and in `stop` (after the join).
    nonisolated(unsafe) private let mainQueue: OpaquePointer

    /// Starts the thread. `produceOne` hands one record to librdkafka; `fail` reports a record
    /// librdkafka refused (not for queue-full, which is retried). `startThread` starts an OS
    /// thread (tests pass one that fails).
    /// - Throws: ``KafkaError`` when the thread cannot start; librdkafka's main queue is then
    ///   left as it was found.
    init(
        client: RDKafkaClient,
        outbox: ProducerOutbox,
        wakeUp: WakeUpPipe,
        startThread: NativeThread.Starter = NativeThread.init,
        produceOne: @escaping @Sendable (KafkaOutboundRecord) -> ProduceOutcome,
        fail: @escaping @Sendable (KafkaOutboundRecord, KafkaError) -> Void
    ) throws {
        // invariant: a producer handle always has a main queue.
        mainQueue = rd_kafka_queue_get_main(client.pointer)!
        var payload: UInt8 = 1
        rd_kafka_queue_io_event_enable(mainQueue, wakeUp.writeDescriptor, &payload, 1)
        do {
            try start(client: client, outbox: outbox, wakeUp: wakeUp, startThread: startThread,
                      produceOne: produceOne, fail: fail)
        } catch {
            rd_kafka_queue_io_event_enable(mainQueue, -1, nil, 0)
            rd_kafka_queue_destroy(mainQueue)
            throw error
        }
    }

    private func start(
        client: RDKafkaClient,
        outbox: ProducerOutbox,
        wakeUp: WakeUpPipe,
        startThread: NativeThread.Starter,
        produceOne: @escaping @Sendable (KafkaOutboundRecord) -> ProduceOutcome,
        fail: @escaping @Sendable (KafkaOutboundRecord, KafkaError) -> Void
    ) throws {
        let started = try startThread("kafka-publisher") { [self, client] in
            var backlog: [KafkaOutboundRecord] = []
            while true {
                rd_kafka_poll(client.pointer, 0)
                if backlog.isEmpty {
                    outbox.takeAll(into: &backlog)
                }
                var handedOver = 0
                var queueFull = false
                while handedOver < backlog.count {
                    switch produceOne(backlog[handedOver]) {
                    case .accepted:
                        handedOver += 1
                    case .failed(let error):
                        fail(backlog[handedOver], error)
                        handedOver += 1
                    case .queueFull:
                        queueFull = true
                    }
                    if queueFull { break }
                }
                if handedOver > 0 {
                    backlog.removeFirst(handedOver)
                    outbox.markRemoved(handedOver)
                }
                let deadline = stopDeadline.load(ordering: .acquiring)
                if deadline != 0 {
                    let drained = backlog.isEmpty && outbox.count == 0
                    if drained || Timestamp.monotonicNanoseconds() >= deadline { break }
                }
                // Queue full: delivery reports (which wake the pipe) make room; the short
                // timeout only bounds a missed wake-up. Records queued meanwhile: no wait.
                if queueFull {
                    wakeUp.wait(timeoutMilliseconds: 10)
                } else if outbox.prepareToWait() {
                    wakeUp.wait(timeoutMilliseconds: deadline != 0 ? 5 : 100)
                    outbox.finishedWaiting()
                }
            }
            leftovers.withLock { $0 = backlog }
        }
        thread.withLock { $0 = started }
    }

    /// Keeps publishing what is queued until it is all handed to librdkafka or
    /// `deadlineNanoseconds` (monotonic) passes, then ends the thread and waits for it.
    /// - Returns: the records it took from the outbox and could not hand over.
    func stop(deadlineNanoseconds: UInt64, wakeUp: WakeUpPipe) -> [KafkaOutboundRecord] {
        stopDeadline.store(max(1, deadlineNanoseconds), ordering: .releasing)
        wakeUp.signal()
        let running = thread.withLock { thread -> NativeThread? in
            defer { thread = nil }
            return thread
        }
        running?.join()
        rd_kafka_queue_io_event_enable(mainQueue, -1, nil, 0)
        rd_kafka_queue_destroy(mainQueue)
        return leftovers.withLock { records in
            defer { records.removeAll() }
            return records
        }
    }
}
