#if canImport(Glibc)
import Glibc
#endif
@testable import Kafka
import Testing

/// The outbox wakes its publisher thread through the pipe only while that thread waits: records
/// appended while it is busy cost no system call, and none is left waiting without a wake-up.
@Suite
struct ProducerOutboxTests {
    private static func record(_ tag: UInt64) -> KafkaOutboundRecord {
        KafkaOutboundRecord(topic: "t", key: nil, value: [1], headers: [], tag: tag)
    }

    /// Whether a byte is waiting in the pipe (then drains it).
    private static func takeSignal(_ pipe: WakeUpPipe) -> Bool {
        var descriptor = pollfd(fd: pipe.readDescriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, 0) > 0
        if ready { pipe.wait(timeoutMilliseconds: 0) }
        return ready
    }

    @Test func anAppendWakesTheWaitingPublisherOnceAndABusyOneNever() throws {
        let pipe = try WakeUpPipe()
        let outbox = ProducerOutbox(shardCount: 4, wakeUp: pipe)
        // Busy publisher (not waiting): appends write nothing.
        #expect(outbox.append(Self.record(1)))
        #expect(!Self.takeSignal(pipe))
        // Records are queued: the publisher must not wait.
        #expect(!outbox.prepareToWait())
        var taken: [KafkaOutboundRecord] = []
        outbox.takeAll(into: &taken)
        outbox.markRemoved(taken.count)
        #expect(taken.map(\.tag) == [1])
        // Nothing queued: it waits, and the first append wakes it; the next ones do not write again.
        #expect(outbox.prepareToWait())
        #expect(outbox.append(Self.record(2)))
        #expect(outbox.append(Self.record(3)))
        #expect(Self.takeSignal(pipe))
        #expect(!Self.takeSignal(pipe))
        outbox.finishedWaiting()
        taken.removeAll()
        outbox.takeAll(into: &taken)
        #expect(taken.map(\.tag) == [2, 3])
    }

    @Test func aDeferredWakeUpWritesOnlyWhenTheCallerAsksAndThePublisherWaits() throws {
        let pipe = try WakeUpPipe()
        let outbox = ProducerOutbox(shardCount: 2, wakeUp: pipe)
        #expect(outbox.prepareToWait())
        #expect(outbox.append(Self.record(1), wake: false))
        #expect(outbox.append(Self.record(2), wake: false))
        #expect(!Self.takeSignal(pipe))  // still asleep: the records wait for the caller's wake-up
        outbox.wakePublisherIfWaiting()
        #expect(Self.takeSignal(pipe))
        outbox.wakePublisherIfWaiting()  // already woken: no second byte
        #expect(!Self.takeSignal(pipe))
        // A publisher that is not waiting is never written to.
        outbox.finishedWaiting()
        outbox.wakePublisherIfWaiting()
        #expect(!Self.takeSignal(pipe))
    }

    @Test func aClosedOutboxRefusesRecordsWithoutWakingAnyone() throws {
        let pipe = try WakeUpPipe()
        let outbox = ProducerOutbox(shardCount: 1, wakeUp: pipe)
        #expect(outbox.append(Self.record(1)))
        #expect(outbox.close().map(\.tag) == [1])
        #expect(outbox.prepareToWait() == false)  // the record counted above was never marked removed
        outbox.markRemoved(1)
        #expect(outbox.prepareToWait())
        #expect(!outbox.append(Self.record(2)))
        #expect(!Self.takeSignal(pipe))
    }
}
