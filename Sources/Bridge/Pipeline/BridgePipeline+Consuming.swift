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
        logger.info("pipeline started", metadata: [
            "kafka.topics": configuration.kafka.topics.joined(separator: ","),
            "kafka.group_id": configuration.kafka.groupID,
        ])
        // Notifications and outputs per record, from the last poll: sizes the next poll so that
        // one batch cannot overshoot `limits.max_in_flight` by much.
        var workPerRecord = 1
        while !isStopRequested, fatalReason == nil {
            lastConsumerIteration.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed)
            applyBackpressure()
            let room = max(0, configuration.limits.maxInFlight - inFlight)
            let messages: [KafkaMessage]
            do {
                messages = try consumer.poll(maxMessages: max(1, min(1000, room / workPerRecord)), timeoutMilliseconds: 100)
            } catch {
                fail("consumer: \(error)")
                break
            }
            var work = 0
            for message in messages {
                // Records left unprocessed here are neither tracked nor committed.
                guard !isStopRequested, fatalReason == nil else { break }
                work += process(message)
            }
            dispatcher.flush()
            if !messages.isEmpty {
                workPerRecord = max(1, work / messages.count)
            }
        }
        return drainAndClose()
    }

    /// Decodes one record and hands out its work; the record's own hold is released last.
    /// - Returns: how many outputs the record will cause (its distinct tokens, or one dead letter).
    @discardableResult
    func process(_ message: KafkaMessage) -> Int {
        let topicPartition = message.topicPartition
        guard let progress = partitions.withLock({ $0[topicPartition] }) else {
            // Not (or no longer) assigned: leave it for the partition's owner.
            return 0
        }
        metrics.recordConsumed(topic: message.topic)
        guard progress.track(message.offset) else {
            logger.debug("record skipped: already tracked in this assignment", metadata: [
                "kafka.partition": "\(topicPartition)", "kafka.offset": "\(message.offset)",
            ])
            return 0
        }
        let source = RecordSource(topic: message.topic, partition: message.partition, offset: message.offset)
        let startedAt = RecordTimestamp.usable(message.timestampMilliseconds, nowMilliseconds: Timestamp.nowMilliseconds())
        switch decoder.decode(value: message.value, source: source) {
        case .deadLetter(let deadLetter):
            let context = RequestContext(
                source: source, requestID: "\(source.topic)/\(source.partition)/\(source.offset)", app: "",
                environment: .production, startedAtMilliseconds: startedAt, partition: progress
            )
            logger.debug("dead letter", metadata: ["error": deadLetter.code.rawValue, "detail": deadLetter.detail])
            metrics.recordDeadLetter(deadLetter.code)
            publisher.publishDeadLetter(deadLetter, message: message, context: context)
            context.release()
            return 1
        case .request(let request):
            let context = RequestContext(
                source: source, requestID: request.id, app: request.app, environment: request.environment,
                startedAtMilliseconds: startedAt, partition: progress
            )
            dispatcher.dispatch(request, context: context)
            context.release()
            return request.validTokens.count + request.invalidTokens.count
        }
    }

    /// Producer thread: one output record is acknowledged (or has finally failed) in Kafka.
    func delivered(tag: UInt64, error: KafkaError?) {
        let context = RequestContext.fromTag(tag)
        publisher.acknowledged()
        if let error {
            // The hold is kept, so the offset is never committed and a restart publishes it again.
            fail("a record could not be delivered to Kafka: \(error)")
            return
        }
        context.release()
    }

    func rebalanced(_ event: KafkaRebalanceEvent) {
        switch event {
        case .assigned(let assigned):
            joinedGroup.store(true, ordering: .releasing)
            logger.info("partitions assigned", metadata: ["kafka.partitions": describe(assigned)])
            let consumer = self.consumer
            let logger = self.logger
            partitions.withLock { map in
                for topicPartition in assigned {
                    map[topicPartition] = PartitionProgress(topicPartition: topicPartition) { topicPartition, next in
                        do {
                            try consumer.storeOffsets([(topicPartition, nextOffset: next)])
                        } catch {
                            logger.debug("offset not stored", metadata: ["kafka.partition": "\(topicPartition)", "error": "\(error)"])
                        }
                    }
                }
            }
            // While fetching is held back, new partitions join the pause.
            pausedPartitions.withLock { paused in
                guard !paused.isEmpty else { return }
                do {
                    try consumer.pause(assigned)
                    paused += assigned
                } catch {
                    logger.warning("pausing new partitions failed", metadata: ["error": "\(error)"])
                }
            }
        case .revoked(let revoked), .lost(let revoked):
            logger.info("partitions revoked", metadata: ["kafka.partitions": describe(revoked)])
            partitions.withLock { map in
                for topicPartition in revoked {
                    map.removeValue(forKey: topicPartition)?.revoke()
                }
            }
            // librdkafka keeps an application pause across unassignment: resume before letting
            // go, or the partition would come back paused if it is assigned here again.
            pausedPartitions.withLock { paused in
                let leaving = paused.filter { revoked.contains($0) }
                if !leaving.isEmpty {
                    try? consumer.resume(leaving)
                }
                paused.removeAll { revoked.contains($0) }
            }
        }
    }

    private func describe(_ list: [KafkaTopicPartition]) -> String {
        list.map(\.description).joined(separator: ",")
    }

    /// Work between fetch and Kafka's acknowledgement: notifications waiting for APNs plus
    /// output records waiting for Kafka.
    var inFlight: Int {
        dispatcher.inFlight + publisher.pendingCount
    }

    /// Keeps in-flight work under `limits.max_in_flight`. At the limit the consumer first stops
    /// taking records (they wait in librdkafka's bounded prefetch queue) for up to the grace
    /// period; if the work has not drained by then, it pauses every assigned partition and keeps
    /// polling, so the group never sees this member exceed `max.poll.interval.ms`. Paused
    /// partitions resume once half of the limit has drained.
    func applyBackpressure() {
        let limit = configuration.limits.maxInFlight
        if inFlight >= limit, pausedPartitions.withLock({ $0.isEmpty }) {
            let deadline = Timestamp.monotonicNanoseconds() + backpressureGraceNanoseconds
            logger.trace("waiting for capacity", metadata: [
                "bridge.apns_in_flight": "\(dispatcher.inFlight)", "bridge.kafka_unacknowledged": "\(publisher.pendingCount)",
            ])
            while inFlight >= limit, Timestamp.monotonicNanoseconds() < deadline, !isStopRequested, fatalReason == nil {
                usleep(500)
            }
            if inFlight >= limit {
                pauseAssignedPartitions()
            }
        } else if inFlight <= limit / 2 {
            resumePausedPartitions()
        }
    }

    private func pauseAssignedPartitions() {
        pausedPartitions.withLock { paused in
            guard paused.isEmpty, let assignment = try? consumer.assignment(), !assignment.isEmpty else { return }
            do {
                try consumer.pause(assignment)
                paused = assignment
                fetchPauses.add(1, ordering: .relaxed)
                logger.debug("paused fetching", metadata: ["bridge.in_flight": "\(inFlight)"])
            } catch {
                logger.warning("pausing partitions failed", metadata: ["error": "\(error)"])
            }
        }
    }

    private func resumePausedPartitions() {
        pausedPartitions.withLock { paused in
            guard !paused.isEmpty else { return }
            do {
                try consumer.resume(paused)
                paused.removeAll()
                logger.debug("resumed fetching", metadata: ["bridge.in_flight": "\(inFlight)"])
            } catch {
                logger.warning("resuming partitions failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Stops fetching, waits (bounded by `shutdown_timeout`) for in-flight work, flushes the
    /// producer and commits. Notifications APNs has not answered by then are abandoned, not
    /// failed: their input offsets stay uncommitted, so a restart sends them again.
    private func drainAndClose() -> Int32 {
        let deadline = Timestamp.monotonicNanoseconds() + configuration.shutdownTimeout.totalNanoseconds
        func millisecondsLeft() -> Int {
            let now = Timestamp.monotonicNanoseconds()
            return max(100, deadline > now ? Int((deadline - now) / 1_000_000) : 0)
        }
        if let assignment = try? consumer.assignment(), !assignment.isEmpty {
            try? consumer.pause(assignment)
        }
        logger.info("draining", metadata: ["bridge.in_flight": "\(inFlight)"])
        while inFlight > 0, Timestamp.monotonicNanoseconds() < deadline, fatalReason == nil {
            // Keep serving the group (and rebalance callbacks) while answers come in; records
            // of newly assigned partitions are left unprocessed and uncommitted.
            lastConsumerIteration.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed)
            do {
                _ = try consumer.poll(maxMessages: 1, timeoutMilliseconds: 20)
            } catch {
                fail("consumer: \(error)")
            }
        }
        let unanswered = dispatcher.inFlight
        if unanswered > 0 {
            logger.warning("stopping with notifications APNs has not answered; they stay uncommitted",
                           metadata: ["bridge.in_flight": "\(unanswered)"])
        }
        dispatcher.abandonUnanswered()
        dispatcher.shutdown()
        producer.close(flushTimeoutMilliseconds: Int32(clamping: millisecondsLeft()))
        consumer.close(timeoutMilliseconds: millisecondsLeft())
        group.shutdown()
        if let reason = fatalReason {
            logger.error("stopped after a fatal error", metadata: ["error": reason])
            return 1
        }
        logger.info("stopped cleanly")
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
