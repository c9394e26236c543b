import HTTP2
import Kafka

/// One wake-up of the producer's publisher thread per event-loop iteration, however many results
/// the iteration published: a read that closes 50 streams costs one `write(2)` and one context
/// switch instead of up to 50.
///
/// Results published on a loop thread are enqueued without waking the publisher
/// (``deferWakeUp()`` returns true and schedules the wake-up at the end of the iteration);
/// anywhere else (the consumer thread) the caller wakes it at once.
final class ProducerWakeUps: Sendable {
    /// The wake-up of one loop; its flag is touched only on that loop's thread.
    private final class LoopWakeUp: EventLoopFlushable, @unchecked Sendable {
        let loop: EventLoop
        let producer: KafkaProducer
        /// Loop thread only.
        var isScheduled = false

        init(loop: EventLoop, producer: KafkaProducer) {
            self.loop = loop
            self.producer = producer
        }

        func flushAtEndOfIteration() {
            isScheduled = false
            producer.wakePublisher()
        }
    }

    private let wakeUps: [LoopWakeUp]

    init(loops: [EventLoop], producer: KafkaProducer) {
        wakeUps = loops.map { LoopWakeUp(loop: $0, producer: producer) }
    }

    /// On one of the loops: schedules the wake-up for the end of this iteration and returns true
    /// (enqueue without waking). Elsewhere: false (enqueue and wake at once).
    func deferWakeUp() -> Bool {
        guard let wakeUp = wakeUps.first(where: { $0.loop.inEventLoop }) else { return false }
        if !wakeUp.isScheduled {
            wakeUp.isScheduled = true
            wakeUp.loop.scheduleFlush(wakeUp)
        }
        return true
    }
}
