#if canImport(Glibc)
import Glibc
#endif
import Observability
import Synchronization

/// Records handed to a producer and not yet given to librdkafka: the non-blocking hand-off
/// between the threads that create outputs (event loops, the consumer) and the one publisher
/// thread that alone calls produce.
///
/// Sharded by calling thread, so event loops appending at once rarely meet on one lock; each
/// lock is held for an array append only. A record appended while the publisher thread waits
/// (``prepareToWait()``) writes one byte to the pipe it waits on (a plain `write(2)`, never a
/// librdkafka call); records appended while it is busy cost no system call, it takes them on its
/// next pass.
final class ProducerOutbox: @unchecked Sendable {
    private struct Shard {
        var records: [KafkaOutboundRecord] = []
        var isClosed = false
    }

    private let shards: [Locked<Shard>]
    private let queuedCount = Atomic<Int>(0)
    /// The publisher thread is about to wait (or waits) for the pipe.
    private let publisherWaiting = Atomic<Bool>(false)
    private let wakeUp: WakeUpPipe

    /// - Parameter wakeUp: written to when a record arrives while the publisher waits.
    init(shardCount: Int, wakeUp: WakeUpPipe) {
        shards = (0..<max(1, shardCount)).map { _ in Locked(Shard()) }
        self.wakeUp = wakeUp
    }

    /// Records waiting in the outbox.
    var count: Int { queuedCount.load(ordering: .relaxed) }

    /// Appends a record. Never blocks.
    /// - Parameter wake: false defers the wake-up to a later `wakePublisherIfWaiting()` by the
    ///   same caller (which must follow: until then a waiting publisher does not see the record).
    /// - Returns: false when the outbox was closed (the record was not taken).
    func append(_ record: KafkaOutboundRecord, wake: Bool = true) -> Bool {
        let shard = shards[ProducerOutbox.shardIndex(count: shards.count)]
        let taken = shard.withLock { shard -> Bool in
            guard !shard.isClosed else { return false }
            shard.records.append(record)
            return true
        }
        guard taken else { return false }
        // Sequentially consistent with `prepareToWait`: either the publisher sees this count
        // before it waits, or this thread sees it waiting and wakes it (exactly one appender does).
        queuedCount.add(1, ordering: .sequentiallyConsistent)
        if wake { wakePublisherIfWaiting() }
        return true
    }

    /// Wakes the publisher thread if it waits (one byte to its pipe; exactly one caller does).
    func wakePublisherIfWaiting() {
        if publisherWaiting.load(ordering: .sequentiallyConsistent),
           publisherWaiting.exchange(false, ordering: .sequentiallyConsistent) {
            wakeUp.signal()
        }
    }

    /// Publisher thread, before waiting on the pipe: from now on an append wakes it.
    /// - Returns: false when records are already queued (do not wait; take them).
    func prepareToWait() -> Bool {
        publisherWaiting.store(true, ordering: .sequentiallyConsistent)
        guard queuedCount.load(ordering: .sequentiallyConsistent) == 0 else {
            publisherWaiting.store(false, ordering: .sequentiallyConsistent)
            return false
        }
        return true
    }

    /// Publisher thread, after waiting: appends need not wake it until the next `prepareToWait`.
    func finishedWaiting() {
        publisherWaiting.store(false, ordering: .relaxed)
    }

    /// Takes everything queued so far (publisher thread), shard by shard in append order.
    func takeAll(into records: inout [KafkaOutboundRecord]) {
        for shard in shards {
            let taken = shard.withLock { shard -> [KafkaOutboundRecord] in
                guard !shard.records.isEmpty else { return [] }
                defer { shard.records.removeAll(keepingCapacity: true) }
                return shard.records
            }
            records.append(contentsOf: taken)
        }
    }

    /// The publisher took back `count` records (produced, or failed to its delivery handler).
    func markRemoved(_ count: Int) {
        queuedCount.subtract(count, ordering: .relaxed)
    }

    /// Refuses further records and returns what was still queued.
    func close() -> [KafkaOutboundRecord] {
        var left: [KafkaOutboundRecord] = []
        for shard in shards {
            left += shard.withLock { shard -> [KafkaOutboundRecord] in
                shard.isClosed = true
                defer { shard.records.removeAll() }
                return shard.records
            }
        }
        return left
    }

    /// Spreads threads over shards by their `pthread_t` (a per-thread address).
    private static func shardIndex(count: Int) -> Int {
        let identity = UInt(pthread_self())
        return Int((identity >> 12 ^ identity >> 20) % UInt(count))
    }
}

/// A non-blocking pipe used to wake a thread waiting in `poll(2)`; librdkafka's main queue
/// writes to it too (`rd_kafka_queue_io_event_enable`), so one wait covers both.
final class WakeUpPipe: @unchecked Sendable {
    let readDescriptor: Int32
    let writeDescriptor: Int32

    init() throws {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw KafkaError(code: KafkaError.Code.invalidArgument, message: "could not create a pipe: errno \(errno)")
        }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        readDescriptor = descriptors[0]
        writeDescriptor = descriptors[1]
    }

    deinit {
        close(readDescriptor)
        close(writeDescriptor)
    }

    /// Wakes the waiter (a full pipe already will).
    func signal() {
        var byte: UInt8 = 1
        _ = write(writeDescriptor, &byte, 1)
    }

    /// Waits up to `timeoutMilliseconds` for a signal, then empties the pipe.
    func wait(timeoutMilliseconds: Int32) {
        var descriptor = pollfd(fd: readDescriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, timeoutMilliseconds) > 0 else { return }
        var scratch = [UInt8](repeating: 0, count: 64)
        while read(readDescriptor, &scratch, scratch.count) > 0 {}
    }
}
