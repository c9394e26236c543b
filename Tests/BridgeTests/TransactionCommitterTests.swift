import APNs
import Foundation
import Kafka
import Observability
import Testing
import TestSupport
@testable import Bridge

/// The committer against librdkafka's mock cluster, with partitions driven by hand: what it
/// commits, in which order, and what a revocation leaves for the new owner.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct TransactionCommitterTests {
    final class Fixture {
        let cluster: MockKafkaCluster
        let producer: KafkaProducer
        let consumer: KafkaConsumer
        let publisher: ResultPublisher
        let committer: TransactionCommitter
        let partitions: Locked<[PartitionProgress]>
        let fatal = Locked<String?>(nil)

        /// - Parameter outputLeader: the broker leading `out` (the coordinators are broker 1).
        /// - Parameter coordinatorDown: broker 1, the coordinators, is down when the committer starts.
        init(brokers: Int = 1, outputLeader: Int32 = 1, committerSettings: TransactionCommitter.Settings = .init(),
             coordinatorDown: Bool = false, producerProperties: [String: String] = [:]) throws {
            cluster = try MockKafkaCluster(brokers: brokers)
            try cluster.createTopic("apns.requests", partitions: 2)
            try cluster.createTopic("out", partitions: 1)
            try cluster.setPartitionLeader(topic: "out", partition: 0, broker: outputLeader)
            try cluster.setGroupCoordinator(groupID: "committer-tests", broker: 1)
            try cluster.setTransactionCoordinator(transactionalID: "committer-tests.one", broker: 1)
            let settings = KafkaSettings(brokers: cluster.bootstrapServers, groupID: "committer-tests", exactlyOnce: true)
            producer = try KafkaProducer(
                bootstrapServers: cluster.bootstrapServers, properties: producerProperties, transactionalID: "committer-tests.one",
                logger: Logger(label: "test.producer"), deliveryHandler: { _, _ in })
            consumer = try KafkaConsumer(
                bootstrapServers: cluster.bootstrapServers, groupID: "committer-tests", topics: [], properties: [:],
                logger: Logger(label: "test.consumer"))
            publisher = ResultPublisher(producer: producer, kafka: settings)
            let partitions = Locked<[PartitionProgress]>([])
            let fatal = self.fatal
            self.partitions = partitions
            committer = TransactionCommitter(
                producer: producer, consumer: consumer, publisher: publisher, settings: committerSettings,
                partitions: { partitions.withLock { $0 } }, isFailed: { fatal.withLock { $0 != nil } },
                onFatal: { reason in fatal.withLock { $0 = $0 ?? reason } })
            if coordinatorDown { cluster.setBrokerDown(1) }
            try committer.start()
        }

        func close() {
            committer.stop()
            producer.close()
            consumer.close()
            cluster.close()
        }

        func partition(_ index: Int32) -> PartitionProgress {
            let progress = PartitionProgress(
                topicPartition: KafkaTopicPartition(topic: "apns.requests", partition: index), completion: .transactional)
            partitions.withLock { $0.append(progress) }
            return progress
        }

        /// Tracks `offset`, buffers `outputs` outputs named `p<partition>-o<offset>-<i>` with the
        /// record, and completes it when `complete`.
        func record(_ progress: PartitionProgress, _ offset: Int64, outputs: Int, complete: Bool = true) -> RequestContext {
            #expect(progress.track(offset))
            let context = RequestContext(
                source: RecordSource(topic: "apns.requests", partition: progress.topicPartition.partition, offset: offset),
                requestID: "p\(progress.topicPartition.partition)-o\(offset)", app: "chat", environment: .production,
                startedAtMilliseconds: nil, partition: progress)
            for index in 0..<outputs {
                _ = context.buffer(KafkaOutboundRecord(
                    topic: "out", key: nil, value: Array("\(context.requestID)-\(index)".utf8), headers: [], tag: 0))
            }
            if complete { context.release() }
            return context
        }

        func committedValues(count: Int) throws -> [String] {
            try KafkaTopicReader.readAll(
                bootstrapServers: cluster.bootstrapServers, topic: "out", expectedCount: count, timeoutMilliseconds: 20_000
            ).map { String(decoding: $0.value ?? [], as: UTF8.self) }
        }
    }

    @Test func outputsLeaveInOffsetOrderOnlyOnceEveryEarlierRecordIsComplete() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let p0 = fixture.partition(0)
        let p1 = fixture.partition(1)
        let first = fixture.record(p0, 10, outputs: 1, complete: false)
        _ = fixture.record(p0, 11, outputs: 2)  // complete, but behind an unfinished record
        // A transaction that took everything released after record 11 completed: none of p0.
        _ = fixture.record(p1, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { p1.committedNextOffset == 1 })
        #expect(p0.committedNextOffset == nil)
        first.release()
        #expect(waitFor(timeout: .seconds(20)) { p0.committedNextOffset == 12 })
        #expect(try fixture.committedValues(count: 4) == ["p1-o0-0", "p0-o10-0", "p0-o11-0", "p0-o11-1"])
        #expect(fixture.committer.transactionCounts.committed == 2)
        #expect(fixture.fatal.withLock { $0 } == nil)
    }

    /// A commit whose records cannot be flushed in time (their partition's leader is down)
    /// fails with a retriable error and stays in progress in librdkafka: it is called again,
    /// not aborted (an abort would be refused and stop the pipeline), and goes through once the
    /// leader is back.
    @Test func aCommitThatTimesOutIsCalledAgainUntilItGoesThrough() throws {
        var settings = TransactionCommitter.Settings()
        settings.timeoutMilliseconds = 1_000
        settings.maxAttempts = 30
        let fixture = try Fixture(brokers: 2, outputLeader: 2, committerSettings: settings)
        defer { fixture.close() }
        let p0 = fixture.partition(0)
        _ = fixture.record(p0, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { p0.committedNextOffset == 1 })

        fixture.cluster.setBrokerDown(2)
        _ = fixture.record(p0, 1, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { fixture.committer.transactionCounts.resumed >= 2 })
        fixture.cluster.setBrokerUp(2)
        #expect(waitFor(timeout: .seconds(30)) { p0.committedNextOffset == 2 })
        #expect(fixture.fatal.withLock { $0 } == nil)
        #expect(try fixture.committedValues(count: 2) == ["p0-o0-0", "p0-o1-0"])
    }

    /// At shutdown every transaction call ends by the deadline the pipeline gives: a commit whose
    /// records cannot be flushed (their leader is down) is left uncommitted, for the next owner
    /// to read again, and `stop` returns within the budget without failing the pipeline, instead
    /// of after 30 s per call and five calls.
    @Test func aCommitThatCannotFinishBeforeTheShutdownDeadlineIsLeftUncommitted() throws {
        let fixture = try Fixture(brokers: 2, outputLeader: 2)   // 30 s per call, five calls
        defer { fixture.close() }
        let p0 = fixture.partition(0)
        _ = fixture.record(p0, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { p0.committedNextOffset == 1 })

        fixture.cluster.setBrokerDown(2)
        let start = Timestamp.monotonicNanoseconds()
        fixture.committer.limitCalls(toEndBy: start + 2_000_000_000)
        _ = fixture.record(p0, 1, outputs: 1)
        fixture.committer.stop()
        let stoppedAfter = Double(Timestamp.monotonicNanoseconds() - start) / 1e9
        #expect(stoppedAfter < 4, "stopped after \(stoppedAfter) s")
        #expect(p0.committedNextOffset == 1)
        #expect(fixture.fatal.withLock { $0 } == nil)
        fixture.cluster.setBrokerUp(2)
        #expect(try fixture.committedValues(count: 1) == ["p0-o0-0"])
    }

    /// While the transaction coordinator cannot be reached at start (the producer still
    /// registering its transactional id), the shutdown's deadline ends the committer in time,
    /// not 30 s calls retried until a stop.
    @Test func theShutdownDeadlineEndsACommitterThatCannotInitialiseTransactions() throws {
        let fixture = try Fixture(brokers: 2, coordinatorDown: true)
        defer { fixture.close() }
        fixture.committer.limitCalls(toEndBy: Timestamp.monotonicNanoseconds() + 2_000_000_000)
        #expect(waitFor(timeout: .seconds(10)) { fixture.committer.hasEnded })
        #expect(fixture.fatal.withLock { $0 } == nil)
        fixture.cluster.setBrokerUp(1)
    }

    /// A stop whose budget runs out while a commit waits for room in the producer's full queue
    /// (the outputs' leader down) ends with the budget: the wait gives up at the calls' deadline,
    /// set while it waits, not once librdkafka's queue has stayed full for 30 s.
    @Test func aCommitWaitingForRoomInAFullQueueGivesUpAtTheShutdownDeadline() throws {
        let fixture = try Fixture(brokers: 2, outputLeader: 2, producerProperties: ["queue.buffering.max.messages": "2"])
        defer { fixture.close() }
        let p0 = fixture.partition(0)
        _ = fixture.record(p0, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { p0.committedNextOffset == 1 })

        fixture.cluster.setBrokerDown(2)
        _ = fixture.record(p0, 1, outputs: 5)
        // Two records fill the queue: the third waits for room.
        #expect(waitFor(timeout: .seconds(20)) { fixture.producer.inFlightCount == 2 })
        let started = Timestamp.monotonicNanoseconds()
        fixture.committer.limitCalls(toEndBy: started + 1_000_000_000)
        fixture.committer.stop()
        let stoppedWithin = (Timestamp.monotonicNanoseconds() - started) / 1_000_000
        #expect(stoppedWithin < 10_000, "stopped after \(stoppedWithin) ms")
        #expect(p0.committedNextOffset == 1)
        fixture.cluster.setBrokerUp(2)
    }

    /// A rebalance while the transaction coordinator cannot be reached at start: nothing of the
    /// leaving partition was committed, so its outputs are dropped at once, and the rebalance
    /// neither waits twice the transaction timeout nor stops the pipeline.
    @Test func aRevocationBeforeTransactionsAreInitialisedDropsTheOutputsAtOnce() throws {
        let fixture = try Fixture(brokers: 2, coordinatorDown: true)
        defer { fixture.close() }
        let p0 = fixture.partition(0)
        _ = fixture.record(p0, 0, outputs: 2)
        fixture.partitions.withLock { $0.removeAll { $0 === p0 } }
        // Waiting for the committer, it would give up after twice the transaction timeout
        // (60 s) and fail the pipeline.
        #expect(fixture.committer.finish(revoking: [p0]))
        #expect(p0.isRevoked)
        #expect(p0.committedNextOffset == nil)
        #expect(fixture.fatal.withLock { $0 } == nil)
        // Once the coordinator is back, transactions carry on, without the dropped outputs.
        fixture.cluster.setBrokerUp(1)
        let p1 = fixture.partition(1)
        _ = fixture.record(p1, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(30)) { p1.committedNextOffset == 1 })
        #expect(try fixture.committedValues(count: 1) == ["p1-o0-0"])
    }

    /// After a fatal error an output is no longer buffered; its record must then never
    /// complete, or a transaction still under way could commit its offset without it.
    @Test func anOutputRefusedAfterAFatalErrorKeepsItsRecordIncomplete() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        // Not handed to the committer: its releases are read here.
        let progress = PartitionProgress(
            topicPartition: KafkaTopicPartition(topic: "apns.requests", partition: 0), completion: .transactional)
        let context = fixture.record(progress, 5, outputs: 0, complete: false)
        fixture.publisher.stopPublishing()
        fixture.publisher.publishResult(
            PushResult(requestID: context.requestID, app: "chat", token: String(repeating: "ab", count: 32), outcome: .delivered,
                       attempts: 1, latencyMilliseconds: nil, source: context.source, completedAtMilliseconds: 0),
            context: context)
        context.release()  // the dispatcher's hold: the record's only one left, but for the output's
        #expect(progress.takeReleased() == nil)
    }

    /// A revocation while a failed batch waits out its backoff commits the leaving partition's
    /// released work at once, rather than dropping it for the new owner to send to APNs again.
    @Test func aRevocationDuringARetryBackoffCommitsWhatTheLeavingPartitionReleased() throws {
        var settings = TransactionCommitter.Settings()
        settings.retryBackoff = .seconds(20)
        let fixture = try Fixture(committerSettings: settings)
        defer { fixture.close() }
        // The first transaction fails with an abortable error (TOPIC_AUTHORIZATION_FAILED).
        fixture.cluster.pushRequestErrors(apiKey: MockKafkaCluster.APIKey.addPartitionsToTransaction, errors: [29])
        let p1 = fixture.partition(1)
        _ = fixture.record(p1, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { fixture.committer.transactionCounts.aborted == 1 })

        fixture.partitions.withLock { $0.removeAll { $0 === p1 } }
        // The wait tells its caller it goes on (the pipeline keeps `/healthz` alive with it).
        var waits = 0
        #expect(fixture.committer.finish(revoking: [p1], whileWaiting: { waits += 1 }))
        #expect(waits > 0)
        #expect(p1.committedNextOffset == 1)
        #expect(fixture.fatal.withLock { $0 } == nil)
        #expect(try fixture.committedValues(count: 1) == ["p1-o0-0"])
    }

    /// A lost partition (the group went on without this member) commits nothing more, not even
    /// what it released into a batch waiting out its backoff: its new owner may be committing it.
    @Test func aLostPartitionsWorkIsDroppedNotCommitted() throws {
        var settings = TransactionCommitter.Settings()
        settings.retryBackoff = .seconds(2)
        let fixture = try Fixture(committerSettings: settings)
        defer { fixture.close() }
        fixture.cluster.pushRequestErrors(apiKey: MockKafkaCluster.APIKey.addPartitionsToTransaction, errors: [29])
        let p0 = fixture.partition(0)
        let p1 = fixture.partition(1)
        _ = fixture.record(p1, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { fixture.committer.transactionCounts.aborted == 1 })
        let released = fixture.record(p1, 1, outputs: 1, complete: false)

        fixture.partitions.withLock { $0.removeAll { $0 === p1 } }
        released.release()
        #expect(fixture.committer.finish(revoking: [p1], committing: false))
        #expect(p1.isRevoked)
        // The next transaction, after the backoff, carries p0's work only.
        _ = fixture.record(p0, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { p0.committedNextOffset == 1 })
        #expect(p1.committedNextOffset == nil)
        #expect(fixture.fatal.withLock { $0 } == nil)
        let values = try KafkaTopicReader.readToEnd(
            bootstrapServers: fixture.cluster.bootstrapServers, topic: "out", timeoutMilliseconds: 20_000
        ).map { String(decoding: $0.value ?? [], as: UTF8.self) }
        #expect(values == ["p0-o0-0"])
    }

    /// When that attempt fails too, the leaving partition's share of the batch is dropped: no
    /// later transaction carries its outputs or its offset, which belong to the new owner.
    @Test func aRevokedPartitionsShareOfAFailedBatchIsNeverCommittedLater() throws {
        // The revocation comes within the first backoff (3 s: ample on a slow machine), so the
        // second error is its attempt's, not a retry's of the committer's own.
        var settings = TransactionCommitter.Settings()
        settings.retryBackoff = .seconds(3)
        let fixture = try Fixture(committerSettings: settings)
        defer { fixture.close() }
        fixture.cluster.pushRequestErrors(apiKey: MockKafkaCluster.APIKey.addPartitionsToTransaction, errors: [29, 29])
        let p0 = fixture.partition(0)
        let p1 = fixture.partition(1)
        _ = fixture.record(p1, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { fixture.committer.transactionCounts.aborted == 1 })

        fixture.partitions.withLock { $0.removeAll { $0 === p1 } }
        #expect(fixture.committer.finish(revoking: [p1]))
        #expect(fixture.committer.transactionCounts.aborted == 2)
        #expect(p1.committedNextOffset == nil)
        // The next transaction carries p0's work only (after the second backoff, 6 s).
        _ = fixture.record(p0, 0, outputs: 1)
        #expect(waitFor(timeout: .seconds(40)) { p0.committedNextOffset == 1 })
        #expect(p1.committedNextOffset == nil)
        #expect(fixture.fatal.withLock { $0 } == nil)
        let values = try KafkaTopicReader.readToEnd(
            bootstrapServers: fixture.cluster.bootstrapServers, topic: "out", timeoutMilliseconds: 20_000
        ).map { String(decoding: $0.value ?? [], as: UTF8.self) }
        #expect(!values.contains("p1-o0-0"), "\(values)")
        #expect(values.contains("p0-o0-0"), "\(values)")
    }

    @Test func aRevocationCommitsWhatTheLeavingPartitionReleasedAndDropsTheRest() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let p0 = fixture.partition(0)
        let p1 = fixture.partition(1)
        _ = fixture.record(p0, 0, outputs: 1)
        _ = fixture.record(p1, 0, outputs: 1)
        let released = fixture.record(p1, 1, outputs: 1, complete: false)
        let unfinished = fixture.record(p1, 2, outputs: 1, complete: false)
        #expect(waitFor(timeout: .seconds(20)) { p0.committedNextOffset == 1 && p1.committedNextOffset == 1 })

        // As the pipeline does: the partition is unlisted first, so only the revocation's own
        // cycle can commit what it releases from now on.
        fixture.partitions.withLock { $0.removeAll { $0 === p1 } }
        released.release()
        #expect(fixture.committer.finish(revoking: [p1]))
        #expect(p1.isRevoked)
        #expect(p1.committedNextOffset == 2)  // the new owner starts at offset 2 and redoes it
        // Work of the revoked partition finishing late is dropped, never committed.
        #expect(!unfinished.buffer(KafkaOutboundRecord(topic: "out", key: nil, value: Array("late".utf8), headers: [], tag: 0)))
        unfinished.release()
        _ = fixture.record(p0, 1, outputs: 1)
        #expect(waitFor(timeout: .seconds(20)) { p0.committedNextOffset == 2 })
        #expect(p1.committedNextOffset == 2)

        let values = try KafkaTopicReader.readToEnd(
            bootstrapServers: fixture.cluster.bootstrapServers, topic: "out", timeoutMilliseconds: 20_000
        ).map { String(decoding: $0.value ?? [], as: UTF8.self) }
        #expect(values.sorted() == ["p0-o0-0", "p0-o1-0", "p1-o0-0", "p1-o1-0"])
    }
}
