import APNs
import Foundation
import Kafka
import Observability
import Testing
@testable import Bridge

/// Per-record hold counting (`RequestContext`) and per-partition progress (`PartitionProgress`):
/// what decides which input offset may be committed.
@Suite struct PartitionProgressTests {
    /// A store queue that records what it stores; `all` stores what is queued first, as the
    /// consumer thread's loop does.
    final class StoreRecorder: Sendable {
        let stored = Locked<[Int64]>([])
        let queue: OffsetStoreQueue

        init() {
            let stored = self.stored
            queue = OffsetStoreQueue { _, next in stored.withLock { $0.append(next) } }
        }

        var all: [Int64] {
            queue.storeQueued()
            return stored.withLock { $0 }
        }
    }

    static let topicPartition = KafkaTopicPartition(topic: "apns.requests", partition: 0)

    func context(_ offset: Int64, _ progress: PartitionProgress) -> RequestContext {
        RequestContext(
            source: RecordSource(topic: "apns.requests", partition: 0, offset: offset), requestID: "r\(offset)",
            app: "chat", environment: .production, startedAtMilliseconds: nil, partition: progress)
    }

    @Test func aRecordCompletesOnlyWhenItsLastHoldIsGivenBack() {
        let recorder = StoreRecorder()
        let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        #expect(progress.track(7))
        let request = context(7, progress)
        request.retain(3)  // three outputs on their way
        request.release()  // the fan-out's own hold
        request.release()
        request.release()
        #expect(recorder.all.isEmpty)
        #expect(progress.pendingCount == 1)
        request.release()  // the last output acknowledged
        #expect(recorder.all == [8])
        #expect(progress.pendingCount == 0)
    }

    @Test func theCommitStopsBeforeAnUnfinishedRecord() {
        let recorder = StoreRecorder()
        let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        let contexts = (Int64(0)..<4).map { offset -> RequestContext in
            #expect(progress.track(offset))
            return context(offset, progress)
        }
        contexts[1].retain()  // record 1's output is refused: its hold is never given back
        for request in contexts { request.release() }
        #expect(recorder.all == [1])  // 2 and 3 are done, but the commit stops before 1
        #expect(progress.pendingCount == 3)
    }

    @Test func aReDeliveredRecordIsRefusedAndCannotCompleteTheEarlierEntry() {
        let recorder = StoreRecorder()
        let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        #expect(progress.track(10))
        #expect(progress.track(11))
        let first = context(10, progress)
        first.retain()  // still has an output on its way
        first.release()
        // An offset reset re-delivers 10 and 11: refused, so nothing can complete them twice.
        #expect(!progress.track(10))
        #expect(!progress.track(11))
        #expect(!progress.track(3))
        #expect(recorder.all.isEmpty)
        let second = context(11, progress)
        second.release()
        #expect(recorder.all.isEmpty)  // 10 is still in flight
        first.release()
        #expect(recorder.all == [12])
        #expect(progress.track(12))
    }

    @Test func revokeWithWorkInFlightStoresNothingLater() {
        let recorder = StoreRecorder()
        let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        let contexts = (Int64(0)..<3).map { offset -> RequestContext in
            #expect(progress.track(offset))
            return context(offset, progress)
        }
        contexts[0].release()
        #expect(recorder.all == [1])
        progress.revoke()
        #expect(!progress.track(3))  // records fetched before the revocation are not processed
        contexts[1].release()  // late completions after the revocation
        contexts[2].release()
        #expect(recorder.all == [1])
        #expect(progress.isRevoked)
    }

    @Test func completionsBetweenTwoStoresStoreThePartitionOnce() {
        let recorder = StoreRecorder()
        let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        let contexts = (Int64(0)..<100).map { offset -> RequestContext in
            #expect(progress.track(offset))
            return context(offset, progress)
        }
        for request in contexts[0..<60] { request.release() }
        #expect(recorder.queue.count == 1)  // queued once, not once per record
        #expect(recorder.all == [60])
        #expect(recorder.all == [60])  // nothing grew: nothing stored again
        for request in contexts[60...] { request.release() }
        #expect(recorder.all == [60, 100])
    }

    @Test func aQueuedStoreOfARevokedPartitionIsDropped() {
        let recorder = StoreRecorder()
        let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        #expect(progress.track(0))
        context(0, progress).release()
        #expect(recorder.queue.count == 1)
        progress.revoke()
        #expect(recorder.all.isEmpty)
    }

    /// A revoked partition lets its offsets go: work that never finishes (an endpoint that stays
    /// unreachable) cannot keep every revoked assignment's span in memory.
    @Test func aRevokedPartitionLetsItsPendingOffsetsGo() {
        let recorder = StoreRecorder()
        let revokedAtOnce = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        let storedThenRevoked = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        for progress in [revokedAtOnce, storedThenRevoked] {
            for offset in Int64(0)..<100_000 { #expect(progress.track(offset)) }
            for offset in Int64(1)..<100_000 { progress.complete(offset) }  // offset 0 never finishes
            #expect(progress.pendingCount == 100_000)
        }
        revokedAtOnce.revoke()
        storedThenRevoked.storeAndRevoke { _, _ in Issue.record("nothing is committable") }
        for progress in [revokedAtOnce, storedThenRevoked] {
            #expect(progress.pendingCount == 0)
            #expect(progress.offsetCapacity <= 64, "\(progress.offsetCapacity) offsets kept")  // a new tracker's
            progress.complete(0)  // finishing late changes nothing
            #expect(!progress.track(100_000))
        }
        #expect(recorder.all.isEmpty)
    }

    /// A revocation stores what completed since the last loop pass before the partition
    /// leaves (librdkafka commits it then), and nothing after.
    @Test func aRevocationStoresWhatCompletedBeforeThePartitionLeaves() {
        let recorder = StoreRecorder()
        let leaving = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: recorder.queue)
        let staying = PartitionProgress(topicPartition: KafkaTopicPartition(topic: "apns.requests", partition: 1),
                                        storeQueue: recorder.queue)
        let contexts = (Int64(0)..<10).map { offset -> RequestContext in
            #expect(leaving.track(offset))
            return context(offset, leaving)
        }
        #expect(staying.track(0))
        let stayingContext = context(0, staying)
        for request in contexts[0..<7] { request.release() }  // completed, queued, not stored yet
        recorder.queue.revoke([leaving])
        #expect(recorder.stored.withLock { $0 } == [7])
        #expect(leaving.isRevoked && !staying.isRevoked)
        for request in contexts[7...] { request.release() }  // completions after it: never stored
        stayingContext.release()  // the partition that stays is stored as before
        #expect(recorder.all == [7, 1])
    }

    /// A completion marks its partition queued under the partition's lock and puts it in the
    /// queue just after: a revocation between the two still stores what it completed. The
    /// partition here was marked by a queue that is gone, which leaves it in exactly that state.
    @Test func aRevocationStoresACompletionNotYetInTheQueue() {
        let recorder = StoreRecorder()
        let leaving: PartitionProgress
        do {  // the partition's queue is gone after this: a completion marks it and queues it nowhere
            let marking = OffsetStoreQueue { _, _ in }
            leaving = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: marking)
        }
        #expect(leaving.track(0))
        #expect(leaving.track(1))
        context(0, leaving).release()
        #expect(recorder.queue.count == 0)
        recorder.queue.revoke([leaving])
        #expect(recorder.stored.withLock { $0 } == [1])
        #expect(leaving.isRevoked)
        context(1, leaving).release()  // after the revocation: never stored
        #expect(recorder.all == [1])
    }

    @Test func aQueueThatIsNeverDrainedFreesItselfAndItsPartitions() {
        weak var weakQueue: OffsetStoreQueue?
        weak var weakProgress: PartitionProgress?
        do {
            let queue = OffsetStoreQueue { _, _ in }
            let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: queue)
            #expect(progress.track(0))
            context(0, progress).release()
            #expect(queue.count == 1)  // queued, never stored (as in the one-shot `send`)
            weakQueue = queue
            weakProgress = progress
        }
        // The queue holds the partition; the partition refers to the queue weakly: no cycle.
        #expect(weakQueue == nil)
        #expect(weakProgress == nil)
    }

    @Test func aRevokeRacingLateCompletionsNeverStoresAfterItReturns() async {
        for _ in 0..<20 {
            let revokeReturned = Locked(false)
            let storesAfterRevoke = Locked(0)
            let queue = OffsetStoreQueue { _, _ in
                if revokeReturned.withLock({ $0 }) { storesAfterRevoke.withLock { $0 += 1 } }
            }
            let progress = PartitionProgress(topicPartition: Self.topicPartition, storeQueue: queue)
            let count = 2_000
            let contexts = (Int64(0)..<Int64(count)).map { offset -> RequestContext in
                _ = progress.track(offset)
                return context(offset, progress)
            }
            let releasing = Locked(4)
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        for index in stride(from: worker, to: count, by: 4) { contexts[index].release() }
                        releasing.withLock { $0 -= 1 }
                    }
                }
                group.addTask {  // stores on another thread while completions and the revocation race
                    while releasing.withLock({ $0 }) > 0 { queue.storeQueued() }
                    queue.storeQueued()
                }
                group.addTask {
                    progress.revoke()
                    revokeReturned.withLock { $0 = true }
                }
            }
            #expect(storesAfterRevoke.withLock { $0 } == 0)
        }
    }
}
