import Foundation
@testable import HTTP2
import Testing
import TestSupport
@testable import APNs
import APNsSimulator
import Observability

/// Starts a simulator on the test credentials with `faults`.
private func startSimulator(_ environment: ClientEnvironment, faults: APNsSimulatorFaults,
                            maxConcurrentStreams: Int = 100, clock: (@Sendable () -> Int64)? = nil) throws -> APNsSimulator {
    var configuration = environment.credentials.simulatorConfiguration()
    configuration.maxConcurrentStreams = maxConcurrentStreams
    configuration.faults = faults
    let simulator = try clock.map { try APNsSimulator(configuration: configuration, clock: $0) } ?? APNsSimulator(configuration: configuration)
    try simulator.start()
    return simulator
}

/// The pool against a misbehaving APNs (the simulator's faults, real TLS on 127.0.0.1).
@Suite struct APNsClientFaultTests {
    @Test(.timeLimit(.minutes(1)))
    func nothingLostWithGoAwaysFivePercent503AndLatency() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults(
            latency: .milliseconds(20), goAwayEveryStreams: 300, failureRates: [503: 0.05]))
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 2, delegate: recorder, maxAttempts: 10)
        defer { client.shutdown() }
        client.start()

        let total = 3_000
        for start in stride(from: 0, to: total, by: 500) {
            client.send(batch(start..<(start + 500)))
        }
        #expect(await eventually(timeout: .seconds(45)) { recorder.callCount >= total && client.queuedCount == 0 })
        expectDelivered(recorder, 0..<total)
        #expect(recorder.callCount == total)
        let statistics = simulator.statistics
        #expect(statistics.goAwaysSent >= 5)
        #expect((statistics.answersByStatus[503] ?? 0) > 0)
        // Every 503 was retried, and the results count the requests APNs saw.
        #expect(recorder.retries[.status5xx] == statistics.answersByStatus[503])
        let retried = recorder.snapshot.values.filter { $0[0].result.attempts > 1 }.count
        #expect(retried > 0)
        #expect(recorder.snapshot.values.reduce(0) { $0 + $1[0].result.attempts }
                == total + (statistics.answersByStatus[503] ?? 0))
    }

    /// APNs down far longer than a notification's attempts and stream timeout would last: every
    /// connect fails, again and again, and the queued notifications wait without an attempt being
    /// counted, then are all delivered once APNs is back. Failing them after some failed
    /// connects would turn an Apple outage into `failed` results and committed offsets.
    @Test(.timeLimit(.minutes(1)))
    func notificationsWaitThroughALongOutageWithoutSpendingAttempts() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let reservation = try PortReservation()
        defer { reservation.release() }
        let down = try ClosingListener(port: reservation.port)
        let recorder = DeliveryRecorder()
        // Two attempts and a 200 ms stream timeout: an outage counted against the notifications
        // would have failed each of them many times over.
        let client = environment.makeClient(port: reservation.port, connections: 2, delegate: recorder,
                                            requestTimeoutNanoseconds: 200_000_000, maxAttempts: 2)
        defer { client.shutdown() }
        client.start()
        client.send(batch(0..<50))

        // 20 failed connects per connection, each backing off up to 50 ms.
        let waited = await eventually { down.acceptedCount >= 40 }
        down.close()
        #expect(waited)
        #expect(recorder.callCount == 0)
        #expect(client.queuedCount == 50)
        #expect(client.isUnreachable)

        let simulator = try APNsSimulator(configuration: environment.credentials.simulatorConfiguration(port: reservation.port))
        try simulator.start()
        defer { simulator.close() }
        #expect(await eventually { recorder.callCount >= 50 })
        expectDelivered(recorder, 0..<50)
        #expect(recorder.snapshot.values.allSatisfy { $0.count == 1 && $0[0].result.attempts == 1 })
        #expect(recorder.retries.isEmpty)
    }

    @Test(.timeLimit(.minutes(1)))
    func nothingLostWhenAConnectionDropsEveryFiftyStreams() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        // A stream window well below the drop interval, as with APNs (hundreds of streams, a
        // connection lost now and then): the streams open at the drop are lost, the rest answered.
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults(dropConnectionEveryStreams: 50),
                                           maxConcurrentStreams: 10)
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 2, delegate: recorder, maxAttempts: 10)
        defer { client.shutdown() }
        client.start()

        client.send(batch(0..<1_000))
        #expect(await eventually(timeout: .seconds(45)) { recorder.callCount >= 1_000 && client.queuedCount == 0 })
        expectDelivered(recorder, 0..<1_000)
        #expect(simulator.statistics.connectionsDropped >= 10)
        #expect((recorder.retries[.connectionLost] ?? 0) > 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func aHalfOpenConnectionIsFoundByPingAndItsStreamsDeliveredElsewhere() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults(halfOpenAfterStreams: 10),
                                           maxConcurrentStreams: 10)
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        // The stream deadline is far away: only the PING can find the silent connection in time.
        let client = environment.makeClient(
            port: simulator.port, connections: 2, delegate: recorder, requestTimeoutNanoseconds: 120_000_000_000,
            pingInterval: .milliseconds(200), pingTimeout: .milliseconds(300))
        defer { client.shutdown() }
        client.start()

        client.send(batch(0..<60))
        // Each connection answers 10 streams and falls silent; found within ping_interval +
        // ping_timeout, closed, and its streams go to the next connections.
        #expect(await eventually(timeout: .seconds(30)) { recorder.callCount >= 60 })
        expectDelivered(recorder, 0..<60)
        #expect(simulator.statistics.connectionsHalfOpened >= 2)
        #expect(simulator.statistics.connectionsAccepted >= 6)
        #expect((recorder.retries[.connectionLost] ?? 0) > 0)
    }

    /// Contract §7: a connection that may be half-open does not hold notifications while
    /// another has room. Once a stream of a silent connection times out, no new stream goes to
    /// it until its PING is acknowledged; here none is, so it is closed after `ping_timeout`.
    @Test(.timeLimit(.minutes(1)))
    func aConnectionWhoseStreamTimedOutTakesNoNewStreamsUntilThePeerAnswers() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        // Five streams at a time: each connection answers its first five, then its next ones go unanswered.
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults(halfOpenAfterStreams: 5),
                                           maxConcurrentStreams: 5)
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(
            port: simulator.port, connections: 2, delegate: recorder, requestTimeoutNanoseconds: 300_000_000,
            maxAttempts: 20, pingInterval: .seconds(60), pingTimeout: .seconds(3))
        defer { client.shutdown() }
        client.start()

        client.send(batch(0..<20))
        #expect(await eventually(timeout: .seconds(40)) { recorder.callCount >= 20 })
        expectDelivered(recorder, 0..<20)
        // Each connection answers 5 streams and falls silent. A stream that times out there is
        // retried on a connection not suspected, or waits for a new one: about once per
        // notification not answered at first (10; 15 when a replacement connection falls silent
        // with five more, and a few more when a slowed answer comes after 300 ms), not every
        // 300 ms until the PING times out (about ten times that).
        let timeouts = recorder.retries[.timeout] ?? 0
        #expect(timeouts >= 10 && timeouts <= 25, "\(timeouts) timeouts")
        #expect(simulator.statistics.connectionsHalfOpened >= 2)
    }

    /// 403 ExpiredProviderToken gets one fresh token at once, which delivers. When that token is
    /// called expired too (a clock off by more than APNs allows), no new one may be signed within
    /// 20 minutes: the notification ends at once with APNs' answer, not after `max_attempts` sends
    /// of a token APNs refuses.
    @Test(.timeLimit(.minutes(1)))
    func expiredProviderTokenGetsAFreshTokenAndIsDelivered() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults(jwtMaximumAge: .seconds(1)))
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 1, delegate: recorder)
        defer { client.shutdown() }
        client.start()
        client.send(batch(0..<1))
        #expect(await eventually { recorder.callCount >= 1 })
        let firstIssuedAt = try #require(environment.tokenProvider.issuedAt)
        // Wait until APNs considers the token expired (its `iat` has whole-second precision).
        #expect(await eventually(timeout: .seconds(10)) { Timestamp.nowMilliseconds() / 1000 >= firstIssuedAt + 2 })

        client.send(batch(1..<6))
        #expect(await eventually { recorder.callCount >= 6 })
        expectDelivered(recorder, 0..<6)
        #expect(recorder.snapshot[1]?[0].result.attempts == 2)
        #expect(recorder.retries[.expiredProviderToken] ?? 0 >= 1)
        let forcedIssuedAt = try #require(environment.tokenProvider.issuedAt)
        #expect(forcedIssuedAt > firstIssuedAt)
        #expect((simulator.statistics.answersByStatus[403] ?? 0) >= 1)

        // Then the fresh token expires too: one request, one final answer.
        #expect(await eventually(timeout: .seconds(10)) { Timestamp.nowMilliseconds() / 1000 >= forcedIssuedAt + 2 })
        let requestsBefore = simulator.statistics.requestsReceived
        client.send(batch(6..<7))
        #expect(await eventually { recorder.callCount >= 7 })
        let result = try #require(recorder.snapshot[6]?.first?.result)
        guard case .response(let response) = result.outcome else {
            Issue.record("expected APNs' answer, got \(result)")
            return
        }
        #expect(response.status == 403)
        #expect(response.reason == .expiredProviderToken)
        #expect(result.attempts == 1)
        #expect(simulator.statistics.requestsReceived == requestsBefore + 1)
        #expect(environment.tokenProvider.issuedAt == forcedIssuedAt)
    }

    /// A client of two connections against a simulator that enforces Apple's per-connection rule
    /// on provider tokens (429 TooManyProviderTokenUpdates for a change within 20 minutes), both
    /// on one test clock.
    private struct PerConnectionTokenRule {
        static let faults = APNsSimulatorFaults(tokenUpdateMinimumInterval: .seconds(20 * 60))
        let clock = TestClock(Timestamp.nowMilliseconds() / 1000)
        let environment: ClientEnvironment
        let simulator: APNsSimulator
        let recorder = DeliveryRecorder()
        let client: APNsClient

        init() throws {
            environment = try ClientEnvironment(tokenClock: clock.function)
            simulator = try startSimulator(environment, faults: Self.faults, clock: clock.function)
            client = environment.makeClient(port: simulator.port, connections: 2, delegate: recorder)
            client.start()
        }

        /// Sends `range` and waits for its results.
        func deliver(_ range: Range<Int>) async -> Bool {
            client.send(batch(range))
            return await eventually { recorder.callCount >= range.upperBound }
        }

        /// Every notification so far delivered, none answered 429 or retried.
        func expectNoTokenUpdateRefused(_ count: Int) {
            expectDelivered(recorder, 0..<count)
            #expect(simulator.statistics.answersByStatus[429] == nil)
            #expect(recorder.retries.isEmpty, "\(recorder.retries)")
        }

        func stop() {
            client.shutdown()
            simulator.close()
            environment.tearDown()
        }
    }

    /// A connection opened 35 minutes into a token's life must not be made to change it when
    /// that token turns 50 minutes old.
    @Test(.timeLimit(.minutes(1)))
    func aConnectionOpenedLateInATokensLifeIsNotMadeToChangeItTooSoon() async throws {
        let rule = try PerConnectionTokenRule()
        defer { rule.stop() }
        #expect(await rule.deliver(0..<20))

        // 35 minutes on, one connection is sent away and replaced.
        rule.clock.advance(by: 35 * 60)
        var goingAway = PerConnectionTokenRule.faults
        goingAway.goAwayEveryStreams = 1
        try rule.simulator.setFaults(goingAway)
        #expect(await rule.deliver(20..<21))
        #expect(await eventually { rule.simulator.statistics.goAwaysSent >= 1 })
        try rule.simulator.setFaults(PerConnectionTokenRule.faults)
        #expect(await eventually { rule.simulator.statistics.connectionsAccepted >= 3 && rule.client.connectionStates[.ready] == 2 })
        #expect(await rule.deliver(21..<61))

        // 51 minutes on: the first token is old for the first connection, not for the new one.
        rule.clock.advance(by: 16 * 60)
        #expect(await rule.deliver(61..<161))
        rule.expectNoTokenUpdateRefused(161)
    }

    /// A connection takes a token when it first sends one, not when the pool merely could have
    /// used it: a connection idle while one notification went out on the other starts its 20
    /// minutes when it first carries a stream, 45 minutes later.
    @Test(.timeLimit(.minutes(1)))
    func aConnectionIdleUntilLateInATokensLifeIsNotMadeToChangeItTooSoon() async throws {
        let rule = try PerConnectionTokenRule()
        defer { rule.stop() }
        #expect(await eventually { rule.client.connectionStates[.ready] == 2 })
        #expect(await rule.deliver(0..<1))
        rule.clock.advance(by: 45 * 60)
        #expect(await rule.deliver(1..<41))
        rule.clock.advance(by: 10 * 60)
        #expect(await rule.deliver(41..<141))
        rule.expectNoTokenUpdateRefused(141)
    }

    /// A server that announces SETTINGS_MAX_CONCURRENT_STREAMS 0 and keeps answering PINGs takes
    /// nothing: its connections are replaced after a request timeout, the endpoint counts as
    /// unreachable while every new one does the same, and once it allows streams again every
    /// notification waiting is delivered.
    @Test(.timeLimit(.minutes(1)))
    func aServerThatAllowsNoStreamsIsLeftAndTheNotificationsWait() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults())
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 1, delegate: recorder,
                                            requestTimeoutNanoseconds: 300_000_000)
        defer { client.shutdown() }
        client.start()
        client.send(batch(0..<1))
        #expect(await eventually { recorder.callCount >= 1 })

        let acknowledged = simulator.statistics.settingsAcknowledgementsReceived
        simulator.setMaxConcurrentStreams(0)
        // The client has the new limit once it acknowledged the SETTINGS that carried it.
        #expect(await eventually { simulator.statistics.settingsAcknowledgementsReceived > acknowledged })
        client.send(batch(1..<6))
        #expect(await eventually(timeout: .seconds(20)) {
            simulator.statistics.connectionsAccepted >= 3 && client.isUnreachable
        }, "replaced, and unreachable while no connection takes streams")
        #expect(recorder.callCount == 1, "waiting, not failed")

        simulator.setMaxConcurrentStreams(100)
        #expect(await eventually(timeout: .seconds(20)) { recorder.callCount >= 6 })
        expectDelivered(recorder, 0..<6)
        #expect(await eventually { !client.isUnreachable })
    }

    @Test(.timeLimit(.minutes(1)))
    func stalledStreamsTimeOutAndAreRetried() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults(stallRate: 0.2))
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 2, delegate: recorder,
                                            requestTimeoutNanoseconds: 300_000_000, maxAttempts: 10)
        defer { client.shutdown() }
        client.start()
        client.send(batch(0..<100))
        #expect(await eventually(timeout: .seconds(45)) { recorder.callCount >= 100 })
        expectDelivered(recorder, 0..<100)
        #expect(simulator.statistics.streamsStalled > 0)
        // Every stalled stream timed out once (a slow machine may add a timeout of a stream
        // answered late, never remove one).
        #expect((recorder.retries[.timeout] ?? 0) >= simulator.statistics.streamsStalled)
    }

    @Test(.timeLimit(.minutes(1)))
    func streamLimitsRaisedAndLoweredMidFlightAreObeyed() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        // Like APNs with token auth: one stream until the first valid request, then 20.
        let simulator = try startSimulator(
            environment, faults: APNsSimulatorFaults(latency: .milliseconds(20), initialMaxConcurrentStreams: 1),
            maxConcurrentStreams: 20)
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 1, delegate: recorder)
        defer { client.shutdown() }
        client.start()
        client.send(batch(0..<400))
        #expect(await eventually { recorder.callCount >= 100 })
        simulator.setMaxConcurrentStreams(3)   // lowered while streams are in flight
        #expect(await eventually(timeout: .seconds(45)) { recorder.callCount >= 400 })
        expectDelivered(recorder, 0..<400)
        let raised = simulator.statistics.peakOpenStreams
        #expect(raised > 1 && raised <= 20)

        simulator.resetStatistics()
        client.send(batch(400..<600))
        #expect(await eventually(timeout: .seconds(45)) { recorder.callCount >= 600 })
        expectDelivered(recorder, 400..<600)
        #expect(simulator.statistics.peakOpenStreams <= 3)
        #expect(simulator.statistics.peakOpenStreams >= 1)
    }

    @Test(.timeLimit(.minutes(1)))
    func refusedStreamsAreResentWithoutSpinningAndWithoutCountingAttempts() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        // Every connection processes one stream, then GOAWAY: all its other streams are refused.
        let simulator = try startSimulator(environment, faults: APNsSimulatorFaults(goAwayEveryStreams: 1))
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 1, delegate: recorder, maxAttempts: 3)
        defer { client.shutdown() }
        client.start()
        let started = ContinuousClock.now
        client.send(batch(0..<8))
        #expect(await eventually(timeout: .seconds(45)) { recorder.callCount >= 8 })
        let elapsed = ContinuousClock.now - started
        let resends = recorder.retries[.goAway] ?? 0
        // Round k: one stream processed, the 8 - k others refused and re-sent.
        #expect(resends >= 7 && resends <= 7 * 8 / 2 + 8)
        // Refused streams wait at least 10 ms before a re-send: no tight loop.
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(seconds >= 0.010 * 7)
        #expect(simulator.statistics.connectionsAccepted >= 8)
        // Not counted as attempts: every one delivered (200) at its first processed request.
        expectDelivered(recorder, 0..<8)
        #expect(recorder.snapshot.values.allSatisfy { $0[0].result.attempts == 1 })
    }

    /// A connection draining after a GOAWAY is no outage, even one that had failed to connect
    /// twice before it served: the bridge must not pause fetching while its streams finish.
    @Test(.timeLimit(.minutes(1)))
    func aConnectionDrainingAfterAGoAwayIsNotAnOutage() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let reservation = try PortReservation()   // refused until the simulator starts
        defer { reservation.release() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: reservation.port, connections: 1, delegate: recorder)
        defer { client.shutdown() }
        client.start()
        #expect(await eventually { client.isUnreachable })   // refused twice in a row

        // Every request brings a GOAWAY that lets it through; its answer takes 3 s.
        var configuration = environment.credentials.simulatorConfiguration(port: reservation.port)
        configuration.faults = APNsSimulatorFaults(latency: .seconds(3), goAwayEveryStreams: 1)
        let simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        defer { simulator.close() }
        #expect(await eventually { client.hasReadyConnection && !client.isUnreachable })
        client.send(batch(0..<1))
        #expect(await eventually { client.connectionStates[.draining] == 1 })
        // Sampled until the answer: unreachable read first, then the states, so that a close
        // after the answer (a failure: the GOAWAY came right after connecting) is never taken
        // for a draining connection.
        var unreachableWhileDraining = 0
        #expect(await eventually(timeout: .seconds(30)) {
            if client.isUnreachable && client.connectionStates[.draining] == 1 { unreachableWhileDraining += 1 }
            return recorder.callCount >= 1
        })
        #expect(unreachableWhileDraining == 0, "a connection draining after a GOAWAY counted as an outage")
        #expect(simulator.statistics.goAwaysSent >= 1)
        expectDelivered(recorder, 0..<1)
    }
}
