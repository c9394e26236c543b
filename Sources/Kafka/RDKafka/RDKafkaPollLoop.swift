import CRdKafka
import Synchronization
import Observability

/// A thread that serves a client's main queue with `rd_kafka_poll` (delivery reports, errors)
/// until ``stop()``.
final class RDKafkaPollLoop: Sendable {
    private let client: RDKafkaClient
    private let stopRequested = Atomic<Bool>(false)
    private let thread = Locked<NativeThread?>(nil)

    /// Starts polling `client` on a new thread.
    init(client: RDKafkaClient, name: String) throws {
        self.client = client
        let started = try NativeThread(name: name) { [client, self] in
            while !self.stopRequested.load(ordering: .acquiring) {
                rd_kafka_poll(client.pointer, 100)
            }
        }
        thread.withLock { $0 = started }
    }

    /// Ends the loop and waits for its thread. Idempotent.
    func stop() {
        stopRequested.store(true, ordering: .releasing)
        // Wake a poll that is waiting; rd_kafka_poll serves the main queue.
        if let mainQueue = rd_kafka_queue_get_main(client.pointer) {
            rd_kafka_queue_yield(mainQueue)
            rd_kafka_queue_destroy(mainQueue)
        }
        let running = thread.withLock { thread -> NativeThread? in
            defer { thread = nil }
            return thread
        }
        running?.join()
    }
}
