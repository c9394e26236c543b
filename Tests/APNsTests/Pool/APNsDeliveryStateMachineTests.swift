import HTTP2
import Testing
@testable import APNs

@Suite struct APNsDeliveryStateMachineTests {
    private func machine(maxAttempts: Int = 5, jitter: APNsJitterSource = seededJitter(3)) -> APNsDeliveryStateMachine {
        APNsDeliveryStateMachine(
            configuration: .init(maxAttempts: maxAttempts,
                                 retryBackoff: APNsBackoff(initial: .milliseconds(100), maximum: .seconds(30))),
            jitter: jitter)
    }

    private static let unavailable = APNsAnswer.response(APNsResponse(status: 503, reason: .serviceUnavailable))

    /// Sends every due notification and answers it with `answer` until the machine finishes it;
    /// returns the result, the retry causes and the retry delays.
    private func runUntilFinished(
        _ machine: inout APNsDeliveryStateMachine, answer: (Int) -> APNsAnswer, afterGoAway: Bool = false,
        start: Int64 = 0
    ) -> (APNsDeliveryResult?, [APNsRetryCause], [Int64]) {
        var now = start
        var causes: [APNsRetryCause] = []
        var delays: [Int64] = []
        var request = 0
        while true {
            var finished: [(APNsDeliveryStateMachine.Entry, APNsDeliveryResult)] = []
            finished += machine.tick(now: instant(nanoseconds: now))
            if let result = finished.first?.1 { return (result, causes, delays) }
            if var entry = machine.nextToSend(now: instant(nanoseconds: now), finished: &finished) {
                let reply = answer(request)
                request += 1
                switch machine.streamFinished(&entry, answer: reply,
                                              disposition: .of(reply, afterGoAway: afterGoAway),
                                              now: instant(nanoseconds: now)) {
                case .finish(let result):
                    return (result, causes, delays)
                case .retry(let cause, let dueAt):
                    causes.append(cause)
                    delays.append(dueAt - now)
                }
            }
            if let result = finished.first?.1 { return (result, causes, delays) }
            guard let next = machine.nextDeadline else { return (nil, causes, delays) }
            now = max(now, next)
        }
    }

    @Test func retriesUntilMaxAttemptsWithFullJitterBackoffAndReportsTheRealCount() {
        var delivery = machine()
        delivery.enqueue([pendingNotification(tag: 1)], now: 0)
        let (result, causes, delays) = runUntilFinished(&delivery) { _ in Self.unavailable }
        let final = try! #require(result)   // invariant in this test: the loop ends with a result
        #expect(final.attempts == 5)
        guard case .response(let response) = final.outcome else {
            Issue.record("expected the last 503, got \(final.outcome)")
            return
        }
        #expect(response.status == 503 && response.reason == .serviceUnavailable)
        #expect(causes == Array(repeating: .status5xx, count: 4))
        for (index, delay) in delays.enumerated() {
            #expect(delay >= 0 && delay <= 100 * millisecond << index)
        }
        #expect(delivery.queuedCount == 0 && delivery.retryingCount == 0)
    }

    @Test func deliveredAfterTransientFailuresCountsEveryRequestAPNsSaw() {
        var delivery = machine()
        delivery.enqueue([pendingNotification(tag: 1)], now: 0)
        let answers: [APNsAnswer] = [
            .response(APNsResponse(status: 429, reason: .tooManyRequests)),
            .failure(.timeout),
            .failure(.connectionLost("reset")),
            .response(APNsResponse(status: 200)),
        ]
        let (result, causes, _) = runUntilFinished(&delivery) { answers[$0] }
        #expect(causes == [.status429, .timeout, .connectionLost])
        #expect(result?.attempts == 4)
        guard case .response(let response)? = result?.outcome else {
            Issue.record("no response")
            return
        }
        #expect(response.status == 200)
    }

    @Test func finalAnswersAreNeverRetried() {
        for status in [400, 403, 404, 405, 410, 413, 418] {
            var delivery = machine()
            delivery.enqueue([pendingNotification(tag: 1)], now: 0)
            let (result, causes, _) = runUntilFinished(&delivery) { _ in
                .response(APNsResponse(status: status, reason: .unknown("SomethingNew")))
            }
            #expect(causes.isEmpty && result?.attempts == 1, "status \(status)")
        }
        // Every 5xx is retried.
        for status in [500, 502, 503, 504, 599] {
            var delivery = machine(maxAttempts: 2)
            delivery.enqueue([pendingNotification(tag: 1)], now: 0)
            let (result, causes, _) = runUntilFinished(&delivery) { _ in .response(APNsResponse(status: status)) }
            #expect(causes == [.status5xx] && result?.attempts == 2, "status \(status)")
        }
    }

    @Test func neverRetriesPastTheExpiration() {
        var delivery = machine(maxAttempts: 1_000)
        // Expires 10 s after the start of simulated time.
        let expiration = instant(nanoseconds: 0).unixSeconds + 10
        delivery.enqueue([pendingNotification(tag: 1, expiration: expiration)], now: 0)
        var lastRequestAt: Int64 = 0
        let (result, causes, delays) = runUntilFinished(&delivery) { _ in Self.unavailable }
        for delay in delays { lastRequestAt += delay }
        #expect(result != nil)
        #expect(causes.count >= 3)
        #expect(lastRequestAt < 10 * second)
        // It was tried: the last answer is reported (failed), not `expired`.
        guard case .response(let response)? = result?.outcome else {
            Issue.record("expected the last 503")
            return
        }
        #expect(response.status == 503 && result!.attempts == causes.count + 1)
    }

    /// A retry whose draw would fall past the expiration is drawn again within the time left,
    /// rather than given up while a retry was still allowed; with less than the first backoff
    /// left, it stops.
    @Test func aRetryDrawnPastTheExpirationIsDrawnAgainWithinTheTimeLeft() {
        let expiration = instant(nanoseconds: 0).unixSeconds + 10
        // Full jitter at 0.9 of 100 ms doubling: requests at 0, 0.09, 0.27, 0.63, 1.35, 2.79 and
        // 5.67 s; the next draw (5.76 s) would land at 11.43 s, past the expiration.
        var delivery = machine(maxAttempts: 10, jitter: fixedJitter(0.9))
        delivery.enqueue([pendingNotification(tag: 1, expiration: expiration)], now: 0)
        let (result, _, delays) = runUntilFinished(&delivery) { request in
            request < 7 ? Self.unavailable : .response(APNsResponse(status: 200))
        }
        #expect(result?.attempts == 8)
        guard case .response(let response)? = result?.outcome else {
            Issue.record("expected the 200, got \(String(describing: result))")
            return
        }
        #expect(response.status == 200)
        #expect(delays.count == 7)
        // 0.9 of the 4.33 s left: the eighth request at about 9.57 s.
        #expect(delays.reduce(0, +) > 9 * second && delays.reduce(0, +) < 10 * second)

        // Always refused: retried in the time left until less than the first backoff remains.
        var refused = machine(maxAttempts: 1_000, jitter: fixedJitter(0.9))
        refused.enqueue([pendingNotification(tag: 1, expiration: expiration)], now: 0)
        let (last, causes, spacing) = runUntilFinished(&refused) { _ in Self.unavailable }
        #expect(causes.count == 8, "\(spacing)")  // 9.57 s, then 0.9 of the 0.43 s left; then 40 ms left
        #expect(spacing.reduce(0, +) < 10 * second)
        #expect(last?.attempts == 9)
    }

    /// `expired` means not sent because the expiration had passed (contract §3), so a stream APNs
    /// did not process is never reported so before then: a re-send whose backoff would end past
    /// the expiration goes out shortly before it instead; refused again, the notification waits
    /// until the expiration has passed.
    @Test func aRefusedNotificationIsReportedExpiredOnlyOnceItsExpirationHasPassed() {
        let start = instant(nanoseconds: 0)
        for secondsLeft: Int64 in [20, 45, 300] {
            let expiration = start.unixSeconds + secondsLeft
            let expiresAt = (expiration * 1000 - start.unixMilliseconds) * millisecond
            var delivery = machine(jitter: seededJitter(UInt64(secondsLeft)))
            delivery.enqueue([pendingNotification(tag: 1, expiration: expiration)], now: 0)
            let (result, causes, delays) = runUntilFinished(&delivery) { _ in .failure(.refused) }
            guard case .expired? = result?.outcome else {
                Issue.record("expected expired, got \(String(describing: result))")
                continue
            }
            #expect(result?.attempts == 0)
            // Every request before the expiration, the last aimed 15 ms before it (a coarse
            // wall clock lags by up to a tick); the end after it.
            let lastSentAt = delays.dropLast().reduce(0, +)
            #expect(lastSentAt <= expiresAt - 14 * millisecond && lastSentAt >= expiresAt - 16 * millisecond,
                    "\(secondsLeft) s: \(delays)")
            #expect(delays.reduce(0, +) >= expiresAt, "\(secondsLeft) s: \(delays)")
            #expect(causes.count == delays.count && delays.allSatisfy { $0 >= 10 * millisecond })
        }

        // Finished after its expiration had passed: reported at once, with no further wait.
        var late = machine()
        let expiration = start.unixSeconds + 1
        late.enqueue([pendingNotification(tag: 2, expiration: expiration)], now: 0)
        var finished: [(APNsDeliveryStateMachine.Entry, APNsDeliveryResult)] = []
        guard var entry = late.nextToSend(now: start, finished: &finished) else {
            Issue.record("nothing to send")
            return
        }
        let answeredAt = start.advanced(by: .seconds(2))
        let decision = late.streamFinished(&entry, answer: .failure(.refused),
                                           disposition: .of(.failure(.refused), afterGoAway: false), now: answeredAt)
        guard case .finish(let result) = decision, case .expired = result.outcome else {
            Issue.record("expected expired at once, got \(decision)")
            return
        }
    }

    /// Any non-negative Int64 is a valid `expiration` (contract §2); the deadline arithmetic of
    /// a retry must not overflow on the largest.
    @Test func theLargestExpirationIsRetriedLikeNone() {
        for expiration in [Int64.max, Int64.max / 1000 + 1, 9_300_000_000_000_000] {
            var delivery = machine(maxAttempts: 3)
            delivery.enqueue([pendingNotification(tag: 1, expiration: expiration)], now: 0)
            let (result, causes, _) = runUntilFinished(&delivery) { _ in Self.unavailable }
            #expect(causes.count == 2, "expiration \(expiration)")
            #expect(result?.attempts == 3, "expiration \(expiration)")
        }
    }

    @Test func notProcessedStreamsAreResentWithoutCountingButNeverInATightLoop() {
        var delivery = machine()
        delivery.enqueue([pendingNotification(tag: 1)], now: 0)
        // A server that refuses 40 streams in a row (far more than maxAttempts), then takes it.
        let refusals = 40
        let (result, causes, delays) = runUntilFinished(&delivery) { request in
            request < refusals ? .failure(.refused) : .response(APNsResponse(status: 200))
        }
        #expect(result?.attempts == 1)   // only the request APNs processed counts
        #expect(causes == Array(repeating: .refused, count: refusals))
        // The first eight: at least 10 ms apart (equal jitter over 20 ms, doubling up to 1 s).
        #expect(delays.prefix(8).allSatisfy { $0 >= 10 * millisecond && $0 <= second })
        // Then slower: from the quick ones' 1 s ceiling, doubling to max_backoff (30 s here).
        #expect(delays.dropFirst(8).allSatisfy { $0 >= 500 * millisecond })
        #expect(delays.suffix(20).allSatisfy { $0 >= 15 * second && $0 <= 30 * second })
        // A tiny max_backoff never makes the later re-sends faster than the quick ones' ceiling.
        var impatient = APNsDeliveryStateMachine(
            configuration: .init(maxAttempts: 5, retryBackoff: APNsBackoff(initial: .milliseconds(1), maximum: .milliseconds(1))),
            jitter: seededJitter(3))
        impatient.enqueue([pendingNotification(tag: 2)], now: 0)
        let (_, _, impatientDelays) = runUntilFinished(&impatient) { request in
            request < refusals ? .failure(.refused) : .response(APNsResponse(status: 200))
        }
        #expect(impatientDelays.dropFirst(8).allSatisfy { $0 >= 500 * millisecond && $0 <= second })

        // With an expiration, an endless series of refusals ends when the next re-send would
        // come after it: APNs never took it, so it was not sent: expired.
        var expiring = machine()
        let base = instant(nanoseconds: 0).unixSeconds
        expiring.enqueue([pendingNotification(tag: 3, expiration: base + 60)], now: 0)
        let (ended, endedCauses, _) = runUntilFinished(&expiring) { _ in .failure(.refused) }
        #expect(ended?.attempts == 0)
        #expect(endedCauses.count > 8)
        if case .expired? = ended?.outcome {} else { Issue.record("\(String(describing: ended?.outcome))") }
        // GOAWAY: the same path, labelled goaway; one re-send, then delivered with attempts 1.
        var other = machine()
        other.enqueue([pendingNotification(tag: 2)], now: 0)
        let replies: [APNsAnswer] = [.failure(.refused), .response(APNsResponse(status: 200))]
        let (delivered, goAwayCauses, _) = runUntilFinished(&other, answer: { replies[$0] }, afterGoAway: true)
        #expect(goAwayCauses == [.goAway] && delivered?.attempts == 1)
    }

    @Test func waitingNotificationsExpireOnTheTimerWithoutAConnection() {
        var delivery = machine()
        let base = instant(nanoseconds: 0).unixSeconds
        delivery.enqueue([
            pendingNotification(tag: 1, expiration: base + 5),
            pendingNotification(tag: 2),
            pendingNotification(tag: 3, expiration: base + 3600),
            pendingNotification(tag: 4, expiration: 0),   // 0: send once, never stored: not a deadline
        ], now: 0)
        // No connection for two hours: only the timer runs.
        var now: Int64 = 0
        var expired: [UInt64: Int64] = [:]
        while now < 2 * 3600 * second, let next = delivery.nextDeadline {
            now = next
            for (entry, result) in delivery.tick(now: instant(nanoseconds: now)) {
                guard case .expired = result.outcome, result.attempts == 0 else {
                    Issue.record("tag \(entry.pending.tag): \(result.outcome)")
                    continue
                }
                expired[entry.pending.tag] = now
            }
        }
        #expect(Set(expired.keys) == [1, 3])
        #expect(expired[1]! <= 6 * second)            // checked every second while waiting
        #expect(expired[3]! <= 3601 * second)
        #expect(delivery.queuedCount == 2)
        var finished: [(APNsDeliveryStateMachine.Entry, APNsDeliveryResult)] = []
        #expect(delivery.nextToSend(now: instant(nanoseconds: now), finished: &finished)?.pending.tag == 2)
        #expect(delivery.nextToSend(now: instant(nanoseconds: now), finished: &finished)?.pending.tag == 4)
        #expect(finished.isEmpty)
    }

    @Test func aRetryIsOneHeapEntryAndTheEarliestSetsTheDeadline() {
        var delivery = machine(jitter: fixedJitter(0.5))
        delivery.enqueue((0..<1_000).map { pendingNotification(tag: $0) }, now: 0)
        var finished: [(APNsDeliveryStateMachine.Entry, APNsDeliveryResult)] = []
        var entries: [APNsDeliveryStateMachine.Entry] = []
        while let entry = delivery.nextToSend(now: instant(nanoseconds: 0), finished: &finished) { entries.append(entry) }
        for (index, entry) in entries.enumerated() {
            let answer: APNsAnswer = index % 2 == 0 ? Self.unavailable : .failure(.timeout)
            var entry = entry
            _ = delivery.streamFinished(&entry, answer: answer, disposition: .of(answer, afterGoAway: false),
                                        now: instant(nanoseconds: Int64(index) * millisecond))
        }
        #expect(delivery.retryingCount == 1_000 && delivery.queuedCount == 0)
        #expect(delivery.nextDeadline == 50 * millisecond)
        _ = delivery.tick(now: instant(nanoseconds: 50 * millisecond))
        #expect(delivery.queuedCount == 1 && delivery.retryingCount == 999)
        #expect(delivery.removeAll().count == 1_000)
    }

    @Test func batchesOfEveryLengthAreSentInTheOrderTheyCame() {
        var delivery = machine()
        var tag: UInt64 = 0
        // Even and odd lengths: a batch is moved into the queue reversed and popped from its end.
        for length in [1, 2, 3, 0, 4, 7] {
            delivery.enqueue((0..<length).map { _ in tag += 1; return pendingNotification(tag: tag) }, now: 0)
        }
        var finished: [(APNsDeliveryStateMachine.Entry, APNsDeliveryResult)] = []
        var sent: [UInt64] = []
        while let entry = delivery.nextToSend(now: instant(nanoseconds: 0), finished: &finished) { sent.append(entry.pending.tag) }
        #expect(sent == Array(1...17))
        #expect(finished.isEmpty)
    }

    @Test func aStandingBacklogDoesNotGrowTheQueuesStorage() {
        var delivery = machine()
        var finished: [(APNsDeliveryStateMachine.Entry, APNsDeliveryResult)] = []
        var tag: UInt64 = 0
        // Always 1,000 waiting while 100,000 pass through: sent entries must not pile up.
        delivery.enqueue((0..<1_000).map { _ in tag += 1; return pendingNotification(tag: tag) }, now: 0)
        for _ in 0..<1_000 {
            delivery.enqueue((0..<100).map { _ in tag += 1; return pendingNotification(tag: tag) }, now: 0)
            for _ in 0..<100 { _ = delivery.nextToSend(now: instant(nanoseconds: 0), finished: &finished) }
        }
        #expect(delivery.queuedCount == 1_000)
        #expect(delivery.queueStorageCount <= 2 * 1_000 + 4_096 + 100)
    }

    /// At shutdown nothing is sent again: an answer that would be retried (a 503, a lost
    /// connection, a refused stream) ends as a lost connection "client is shutting down", which
    /// the bridge leaves unanswered; a final answer, or one that used the last attempt, is reported
    /// as ever.
    @Test func atShutdownARetriableAnswerEndsUnansweredUnlessItWasTheLastAttempt() {
        let delivery = machine(maxAttempts: 2)
        let cases: [(answer: APNsAnswer, attemptsBefore: Int, attempts: Int, unanswered: Bool)] = [
            (Self.unavailable, 0, 1, true),
            (.failure(.refused), 0, 0, true),
            (.failure(.connectionLost("reset")), 0, 1, true),
            (Self.unavailable, 1, 2, false),
            (.response(APNsResponse(status: 200)), 0, 1, false),
            (.response(APNsResponse(status: 400, reason: .badDeviceToken)), 0, 1, false),
        ]
        for (answer, attemptsBefore, attempts, unanswered) in cases {
            var entry = APNsDeliveryStateMachine.Entry(pendingNotification(tag: 1))
            entry.attempts = attemptsBefore
            let result = delivery.streamFinishedAtShutdown(&entry, answer: answer,
                                                           disposition: .of(answer, afterGoAway: false))
            #expect(result.attempts == attempts && entry.attempts == attempts, "\(answer)")
            if case .failure(.connectionLost(let reason)) = result.outcome, reason == APNsDeliveryStateMachine.shutdownReason {
                #expect(unanswered, "\(answer)")
            } else {
                #expect(!unanswered, "\(answer): \(result.outcome)")
            }
        }
        #expect(delivery.queuedCount == 0 && delivery.retryingCount == 0)
    }
}
