#if canImport(Glibc)
import Glibc
#endif
import APNs
import HTTP2
import Synchronization
import Kafka
import Observability

extension BridgePipeline {
    /// Runs on the calling thread until `requestStop()` or a fatal error, then drains within
    /// `shutdown_timeout`, flushes, commits and returns.
    /// - Returns: 0 after a clean stop, 1 after a fatal error.
    public func run() -> Int32 {
        lastConsumerIteration.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed)
        consuming.store(true, ordering: .relaxed)
        defer { consuming.store(false, ordering: .relaxed) }
        dispatcher.start()
        if let committer {
            do {
                try committer.start()
            } catch {
                fail("transaction committer: \(error)")
            }
        }
        startLagProbe()
        logger.info("pipeline started", metadata: [
            "kafka.topics": configuration.kafka.topics.joined(separator: ","),
            "kafka.group_id": configuration.kafka.groupID,
            "kafka.exactly_once": "\(configuration.kafka.exactlyOnce)",
        ])
        // Records polled and not yet admitted, with the assignment they were fetched under.
        var waiting = AdmissionQueue(largestWork: configuration.limits.maxTokensPerRequest)
        var progressCache = PartitionProgressCache()
        var lastSpanCheck: UInt64 = 0
        while !isStopRequested, !hasFailed {
            let now = Timestamp.monotonicNanoseconds()
            lastConsumerIteration.store(now, ordering: .relaxed)
            applyBackpressure()
            boundUncommittedSpans(ifDueAt: now, lastCheck: &lastSpanCheck)
            let limit = configuration.limits.maxInFlight
            let room = max(0, limit - workCountedByLimit)
            // Poll for more only when everything polled so far was admitted; otherwise poll one
            // record at most, so the group still sees this member alive while it waits for room
            // (or, exactly once, for its transactions to be initialised).
            let wanted = waiting.isEmpty ? waiting.pollSize(room: room) : 1
            let timeout: Int32 = waiting.isEmpty || workCountedByLimit >= limit || !transactionsReady ? 100 : 0
            let paused = partitionsPausedByBridge()
            var strays: Set<KafkaTopicPartition> = []
            do {
                try consumer.poll(maxMessages: wanted, timeoutMilliseconds: timeout) { record in
                    if !paused.isEmpty, paused.contains(record.topicPartition) {
                        strays.insert(record.topicPartition)
                    }
                    let progress = progressCache.progress(
                        of: record.topicPartition, generation: assignmentGeneration.load(ordering: .relaxed), in: partitions)
                    // Admitted where librdkafka holds it while there is room and nothing waits
                    // before it; copied (key and headers too) only to wait, keeping the order.
                    if waiting.isEmpty, canAdmit(limit: limit) {
                        waiting.noteRecordBytes(record.value?.count ?? 0)
                        admit(record, progress: progress, learningInto: &waiting)
                    } else {
                        waiting.append(record.message(), progress: progress)
                    }
                }
            } catch {
                fail("consumer: \(error)")
                break
            }
            if !strays.isEmpty {
                pauseAgain(strays)
            }
            admitWaiting(&waiting)
            dispatcher.flush()
            offsetStores?.storeQueued()
        }
        return drainAndClose()
    }

    /// At least once: the queue through which completed offsets are stored for the consumer's
    /// commit. A store refused because the partition is no longer assigned is not an error (its
    /// new owner reads the record again); any other failure is logged.
    static func offsetStoreQueue(consumer: KafkaConsumer) -> OffsetStoreQueue {
        let logger = Logger(label: "bridge.offsets")
        return OffsetStoreQueue { topicPartition, next in
            do {
                try consumer.storeOffsets([(topicPartition, nextOffset: next)])
            } catch {
                logger.debug("offset not stored", metadata: ["kafka.partition": "\(topicPartition)", "error": "\(error)"])
            }
        }
    }

    /// Processes waiting records while in-flight work is under `limits.max_in_flight`. The
    /// decision is made per record after decoding, so in-flight work exceeds the limit by at most
    /// one request (its tokens), whatever the fan-out of the records fetched.
    func admitWaiting(_ waiting: inout AdmissionQueue) {
        let limit = configuration.limits.maxInFlight
        while canAdmit(limit: limit), let next = waiting.popFirst() {
            // Records left unprocessed here are neither tracked nor committed.
            admit(next.message, progress: next.progress, learningInto: &waiting)
        }
    }

    /// Whether another record may be admitted: work under `limit` (``workCountedByLimit``), no
    /// stop, no fatal error, and exactly once, transactions initialised.
    private func canAdmit(limit: Int) -> Bool {
        workCountedByLimit < limit && !isStopRequested && !hasFailed && transactionsReady
    }

    /// At least once, always; exactly once, whether the committer initialised its transactions.
    var transactionsReady: Bool { committer?.isReady ?? true }

    /// Processes one record, lets `waiting` learn the work it caused (for sizing polls) and
    /// records the peak of in-flight work.
    private func admit<Record: ConsumedRecord>(_ record: Record, progress: PartitionProgress?,
                                               learningInto waiting: inout AdmissionQueue) {
        waiting.recordWork(process(record, progress: progress))
        notePeakInFlight()
    }

    /// Decodes one record and hands out its work; the record's own hold is released last.
    /// - Parameter progress: the partition's progress when the record was polled; nil (not
    ///   assigned then) or revoked since: the record is left for the partition's owner.
    /// - Returns: how many units of in-flight work the record caused (its distinct tokens, or its
    ///   dead letter's weight); 0 when it was skipped.
    @discardableResult
    func process<Record: ConsumedRecord>(_ message: Record, progress: PartitionProgress?) -> Int {
        let topicPartition = message.topicPartition
        guard let progress else {
            // Not (or no longer) assigned: leave it for the partition's owner.
            return 0
        }
        guard progress.track(message.offset) else {
            logger.debug("record skipped: revoked, or already tracked in this assignment", metadata: [
                "kafka.partition": "\(topicPartition)", "kafka.offset": "\(message.offset)",
            ])
            return 0
        }
        metrics.recordConsumed(topic: message.topic)
        let source = RecordSource(topic: message.topic, partition: message.partition, offset: message.offset)
        // The record's timestamp is checked against the bridge's clock to within a day: the
        // coarse clock is plenty.
        let startedAt = RecordTimestamp.usable(message.timestampMilliseconds, nowMilliseconds: Timestamp.coarseNowMilliseconds())
        switch message.decodeValue(with: decoder, source: source) {
        case .deadLetter(let deadLetter):
            let original = message.message()
            let context = RequestContext(
                source: source, requestID: deadLetter.requestID ?? PushRequestDecoder.defaultID(of: source), app: "",
                environment: .production, startedAtMilliseconds: startedAt, partition: progress,
                outputWeight: publisher.deadLetterWeight(of: original)
            )
            logger.debug("dead letter", metadata: ["error": deadLetter.code.rawValue, "detail": deadLetter.detail])
            metrics.recordDeadLetter(deadLetter.code)
            workInFlight.add(context.outputWeight, ordering: .relaxed)  // before its acknowledgement can come
            publisher.publishDeadLetter(deadLetter, message: original, context: context)
            context.release()
            return context.outputWeight
        case .request(let request):
            if logger.isEnabled(.debug) {
                logger.debug("request admitted", metadata: [
                    "bridge.request_id": request.id, "kafka.partition": "\(topicPartition)", "kafka.offset": "\(message.offset)",
                    "bridge.tokens": "\(request.validTokens.count + request.invalidTokens.count)",
                ])
            }
            let context = RequestContext(
                source: source, requestID: request.id, app: request.app, environment: request.environment,
                startedAtMilliseconds: startedAt, partition: progress
            )
            let work = request.validTokens.count + request.invalidTokens.count
            workInFlight.add(work, ordering: .relaxed)  // before any of its results can be acknowledged
            dispatcher.dispatch(request, context: context)
            context.release()
            return work
        }
    }

    /// Producer thread: one output record is acknowledged (or has finally failed) in Kafka.
    func delivered(tag: UInt64, error: KafkaError?) {
        let context = RequestContext.fromTag(tag)
        publisher.acknowledged(tag: tag, context: context)
        if RequestContext.countsAsWork(tag) {
            // A result or dead letter: its work is done.
            workInFlight.subtract(context.outputWeight, ordering: .relaxed)
        }
        if let error {
            // The hold is kept, so the offset is never committed and a restart publishes it again.
            if producerClosing.load(ordering: .acquiring), KafkaError.Code.leftAtClose.contains(error.code) {
                // Purged (or never produced) when the stop's time was up: abandoned like an
                // unanswered notification, not a failure of the bridge.
                outputsAbandonedAtClose.add(1, ordering: .relaxed)
                return
            }
            fail("a record could not be delivered to Kafka: \(error)")
            return
        }
        context.release()
    }

    func rebalanced(_ event: KafkaRebalanceEvent) {
        switch event {
        case .assigned(let assigned):
            lostGroup.store(false, ordering: .relaxed)
            joinedGroup.store(true, ordering: .releasing)
            logger.info("partitions assigned", metadata: ["kafka.partitions": describe(assigned)])
            let completion: PartitionProgress.Completion = offsetStores.map { .storeOffsets($0) } ?? .transactional
            partitions.withLock { map in
                for topicPartition in assigned {
                    map[topicPartition] = PartitionProgress(topicPartition: topicPartition, completion: completion)
                }
            }
            assignmentGeneration.add(1, ordering: .relaxed)
            // While fetching is held back, new partitions join the pause (also when every
            // partition it paused has left: the reason to hold back has not).
            fetchHold.withLock { hold in
                guard hold.isHeld else { return }
                do {
                    try consumer.pause(assigned)
                    if hold.partitions.isEmpty, !assigned.isEmpty { fetchPauses.add(1, ordering: .relaxed) }
                    hold.partitions += assigned
                } catch {
                    logger.warning("pausing new partitions failed", metadata: ["error": "\(error)"])
                }
            }
        case .revoked(let revoked), .lost(let revoked):
            if case .lost = event {
                // Not a member any more until the group takes it back: `/readyz` says so.
                lostGroup.store(true, ordering: .relaxed)
                joinedGroup.store(false, ordering: .releasing)
            }
            logger.info("partitions revoked", metadata: ["kafka.partitions": describe(revoked)])
            let leaving = partitions.withLock { map in revoked.compactMap { map.removeValue(forKey: $0) } }
            assignmentGeneration.add(1, ordering: .relaxed)
            let handOverEnds = handOverDeadline()
            let drained = if case .revoked = event { drainLeavingWork(leaving, until: handOverEnds) } else { false }
            if let committer {
                // Commit what they released, drop the rest: the new owner starts where this stops.
                // Lost partitions commit nothing more: the group may have given them to another member.
                let isLost = if case .lost = event { true } else { false }
                committer.finish(revoking: leaving, committing: !isLost, whileWaiting: stampWaitingOnPurpose)
                let offsets = leaving.compactMap { progress in
                    progress.committedNextOffset.map { (progress.topicPartition, nextOffset: $0) }
                }
                if case .revoked = event, fatalReason == nil {
                    do {
                        try consumer.commitSync(offsets, until: Self.handOverCommitDeadline(handOverEnds))
                    } catch {
                        logger.debug("offsets of revoked partitions not committed again", metadata: ["error": "\(error)"])
                    }
                }
            } else if let offsetStores {
                offsetStores.revoke(leaving)  // what completed is stored as they leave, under each one's lock
                if drained, fatalReason == nil {
                    commitDrainedOffsets(of: leaving, handOverEnds: handOverEnds)
                }
            } else {
                for progress in leaving { progress.revoke() }
            }
            // librdkafka keeps an application pause across unassignment: resume before letting
            // go, or the partition would come back paused if it is assigned here again.
            fetchHold.withLock { hold in
                let leaving = hold.partitions.filter { revoked.contains($0) }
                if !leaving.isEmpty {
                    try? consumer.resume(leaving)
                }
                hold.partitions.removeAll { revoked.contains($0) }
            }
            releaseSpanPause(of: revoked)
        }
    }

    func describe(_ list: [KafkaTopicPartition]) -> String {
        list.map(\.description).joined(separator: ",")
    }

    /// Work between admission and Kafka's acknowledgement, one unit per token (or dead letter):
    /// notifications waiting for APNs plus results and dead letters waiting for Kafka. At least
    /// once it is one counter (`workInFlight`, taken back by delivery reports), so a token moving
    /// from the first to the second is counted exactly once at every moment. Exactly once there
    /// are no per-record delivery reports: outputs leave when their transaction commits, so the
    /// work is the notifications waiting for APNs plus the outputs buffered for a transaction.
    ///
    /// Exactly once, work moves from the first counter to the second (a notification's result is
    /// buffered after its APNs count is taken back), so the second is read first: a move between
    /// the two readings then makes the sum briefly low, never above the true work.
    var inFlight: Int {
        guard committer != nil else { return workInFlight.load(ordering: .relaxed) }
        let buffered = publisher.pendingCount
        atomicMemoryFence(ordering: .acquiring)  // the APNs count is read after, not before
        return dispatcher.inFlight + buffered
    }

    /// Keeps the highest in-flight work seen; called after each admission, the only moment it grows.
    func notePeakInFlight() {
        let now = inFlight
        var peak = peakInFlightValue.load(ordering: .relaxed)
        while now > peak {
            let (exchanged, original) = peakInFlightValue.compareExchange(
                expected: peak, desired: now, ordering: .relaxed)
            if exchanged { break }
            peak = original
        }
    }

    /// The part of `shutdown_timeout` kept after the drain for flushing the producer and the
    /// final commit: a tenth, at least 1 s, at most a quarter. Without it a drain that waits for
    /// APNs to the end would leave the last answers' results 100 ms to be acknowledged, and the
    /// process would exit after `shutdown_timeout`.
    static func closingReserveNanoseconds(of timeout: UInt64) -> UInt64 {
        min(timeout / 4, max(1_000_000_000, timeout / 10))
    }

    /// Stops fetching, waits (bounded by `shutdown_timeout`, less the closing reserve) for
    /// in-flight work, flushes the producer and commits. Notifications APNs has not answered by
    /// then are abandoned, not failed: their input offsets stay uncommitted, so a restart sends
    /// them again.
    private func drainAndClose() -> Int32 {
        let timeout = configuration.shutdownTimeout.totalNanoseconds
        let deadline = Timestamp.monotonicNanoseconds() + timeout
        let drainDeadline = deadline - Self.closingReserveNanoseconds(of: timeout)
        func millisecondsLeft() -> Int {
            let now = Timestamp.monotonicNanoseconds()
            return max(100, deadline > now ? Int((deadline - now) / 1_000_000) : 0)
        }
        if let assignment = try? consumer.assignment(), !assignment.isEmpty {
            try? consumer.pause(assignment)
        }
        // Exactly once: no transaction call of the drain or the last commit outlasts the budget.
        committer?.limitCalls(toEndBy: deadline - Self.closingReserveNanoseconds(of: timeout) / 2)
        logger.info("draining", metadata: ["bridge.in_flight": "\(inFlight)"])
        while inFlight > 0, Timestamp.monotonicNanoseconds() < drainDeadline, fatalReason == nil {
            // Keep serving the group (and rebalance callbacks) while answers come in; records
            // of newly assigned partitions are left unprocessed and uncommitted.
            lastConsumerIteration.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed)
            do {
                _ = try consumer.poll(maxMessages: 1, timeoutMilliseconds: 20)
            } catch {
                fail("consumer: \(error)")
            }
            offsetStores?.storeQueued()
        }
        let unanswered = dispatcher.inFlight
        if unanswered > 0 {
            logger.warning("stopping with notifications APNs has not answered; they stay uncommitted",
                           metadata: ["bridge.in_flight": "\(unanswered)"])
        }
        dispatcher.abandonUnanswered()
        dispatcher.shutdown()
        committer?.stop()
        producerClosing.store(true, ordering: .releasing)
        producer.close(flushTimeoutMilliseconds: Int32(clamping: millisecondsLeft()))
        let abandoned = outputsAbandonedAtClose.load(ordering: .relaxed)
        if abandoned > 0 {
            logger.warning("stopping with outputs Kafka has not acknowledged; their records stay uncommitted",
                           metadata: ["kafka.outputs": "\(abandoned)"])
        }
        offsetStores?.storeQueued()  // the last delivery reports' offsets, for the close's commit
        lagProbe.withLock { $0 }?.stop()  // before the close: the probe's request uses the consumer
        consumer.close(timeoutMilliseconds: millisecondsLeft())
        group.shutdown()
        if let reason = fatalReason {
            logger.error("stopped after a fatal error", metadata: ["error": reason])
            return 1
        }
        logger.info("stopped cleanly", metadata: ["bridge.peak_in_flight": "\(peakInFlight)"])
        return 0
    }
}

extension Duration {
    /// The duration in whole nanoseconds (negative durations count as zero).
    var totalNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
