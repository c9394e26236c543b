import APNs
import COpenSSL
import HTTP2
import Observability
import Testing
@testable import APNsSimulator

/// Each fault proven over real TLS + HTTP/2 sockets with a real `HTTP2ClientConnection` as the peer.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct APNsSimulatorFaultTests {
    @Test func latencyDelaysEveryAnswerOnTheLoopTimer() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(latency: .milliseconds(300)))
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        let started = ContinuousClock.now
        let results = await client.exchange([fixture.request(authorization: authorization),
                                             fixture.request(authorization: authorization)])
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        #expect(results.map { $0.statusAndReason?.status } == [200, 200])

        try fixture.simulator.setFaults(APNsSimulatorFaults())
        let quick = await client.exchange([fixture.request(authorization: authorization)])
        #expect(quick.first?.statusAndReason?.status == 200)
        await client.stop()
    }

    @Test func answersWaitingForStreamsTheClientResetOrClosedAreWithdrawn() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(latency: .seconds(60)))
        defer { fixture.stop() }
        let authorization = try fixture.authorization()

        // The client's stream timeout resets every stream long before the delay passes (and
        // after the simulator has every request in hand).
        let impatient = try fixture.client(streamTimeout: .seconds(2))
        #expect(await impatient.connect())
        let reset = await impatient.exchange(Array(repeating: fixture.request(authorization: authorization), count: 20))
        #expect(reset.map(\.failure) == Array(repeating: .timeout, count: 20))
        #expect(await eventually {
            let statistics = fixture.simulator.statistics
            return statistics.answersWithdrawn == 20 && statistics.answersWaiting == 0
        }, "\(fixture.simulator.statistics)")

        // A connection that closes with answers waiting leaves none behind either.
        let patient = try fixture.client()
        #expect(await patient.connect())
        let sent = await patient.send(Array(repeating: fixture.request(authorization: authorization), count: 5))
        #expect(sent.count == 5)
        #expect(await eventually { fixture.simulator.statistics.answersWaiting == 5 })
        await patient.stop()
        #expect(await eventually {
            let statistics = fixture.simulator.statistics
            return statistics.answersWithdrawn == 25 && statistics.answersWaiting == 0
        }, "\(fixture.simulator.statistics)")
        #expect(fixture.simulator.statistics.answers == 0)
        await impatient.stop()
    }

    @Test func atTheConnectionLimitTheConnectionIdleLongestMakesRoomOrTheNewOneIsRefused() async throws {
        let fixture = try SimulatorFixture(maxConnections: 3)
        defer { fixture.stop() }
        let authorization = try fixture.authorization()
        var clients: [SimulatorClient] = []
        for _ in 0..<3 {
            // Stalled streams below stay open for the test's length unless a client resets them.
            let client = try fixture.client(streamTimeout: .seconds(120))
            #expect(await client.connect())
            clients.append(client)
        }
        // The first connection answers a request: the second is now the one idle longest.
        #expect(await clients[0].exchange([fixture.request(authorization: authorization)]).first?.statusAndReason?.status == 200)

        // A fourth connection takes the place of the one idle longest, not of the oldest.
        let fourth = try fixture.client(streamTimeout: .seconds(4))
        #expect(await fourth.connect())
        #expect(await eventually { clients[1].closeReason != nil })
        #expect(clients[0].closeReason == nil && clients[2].closeReason == nil)
        #expect(fixture.simulator.statistics.connectionsEvicted == 1)
        #expect(await eventually { fixture.simulator.openConnections == 3 })

        // With a request being answered on every connection, a new one is refused and the
        // others stay.
        try fixture.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        let busy = [clients[0], clients[2], fourth]
        for client in busy { #expect(await client.send([fixture.request(authorization: authorization)]).count == 1) }
        #expect(await eventually { fixture.simulator.statistics.streamsStalled == 3 })
        let refused = try fixture.client()
        #expect(await refused.connect() == false)
        #expect(fixture.simulator.statistics.connectionsRefused == 1)
        #expect(busy.allSatisfy { $0.closeReason == nil })

        // Once the fourth client's stream times out (it resets it), its connection is idle again
        // and makes room for the next.
        #expect(await eventually { fourth.record.withLock { $0.results.count == 1 } })
        // The reset goes out after the result; a PING sent after it is answered once the
        // simulator has read it (frames in order).
        let pingsAnswered = fixture.simulator.statistics.pingsAnswered
        fourth.ping()
        #expect(await eventually { fixture.simulator.statistics.pingsAnswered > pingsAnswered })
        let fifth = try fixture.client()
        #expect(await fifth.connect())
        #expect(await eventually { fourth.closeReason != nil })
        #expect(clients[0].closeReason == nil && clients[2].closeReason == nil)
        #expect(fixture.simulator.statistics.connectionsEvicted == 2)

        try fixture.simulator.setFaults(APNsSimulatorFaults())
        let answered = await fifth.exchange([fixture.request(authorization: authorization)])
        #expect(answered.first?.statusAndReason?.status == 200)
        for client in clients + [fourth, refused, fifth] { await client.stop() }
    }

    /// A client that starts a request and never finishes it holds no connection against the
    /// limit: only requests being answered keep a connection from being chosen.
    @Test func aConnectionWithOnlyAnUnfinishedRequestCountsAsIdle() async throws {
        let fixture = try SimulatorFixture(maxConnections: 1)
        defer { fixture.stop() }
        let port = fixture.simulator.port, caFile = fixture.credentials.caFile
        let closedByServer = Locked<Bool?>(nil)
        try ThreadStarter.start(name: "unfinished-request", detached: true) {
            let closed = try? withRawTLSClient(port: port, caFile: caFile) { ssl -> Bool in
                let bytes = unfinishedHTTP2Request(authority: "127.0.0.1")
                guard SSL_write(ssl, bytes, Int32(bytes.count)) == Int32(bytes.count) else { return false }
                return readUntilTheServerCloses(ssl)
            }
            closedByServer.withLock { $0 = closed ?? false }
        }
        #expect(await eventually { fixture.simulator.statistics.peakOpenStreams == 1 })

        let client = try fixture.client()
        #expect(await client.connect())
        #expect(await eventually { closedByServer.withLock { $0 } != nil })
        #expect(closedByServer.withLock { $0 } == true)
        #expect(fixture.simulator.statistics.connectionsEvicted == 1)
        let answered = await client.exchange([fixture.request(authorization: try fixture.authorization())])
        #expect(answered.first?.statusAndReason?.status == 200)
        await client.stop()
    }

    /// Nor does a client that never lets its answer out (a zero flow-control window holds the
    /// answer's body back): its request was answered, so its connection can be chosen to make room.
    @Test func aConnectionWhoseAnswerTheClientHoldsBackCountsAsIdle() async throws {
        let fixture = try SimulatorFixture(maxConnections: 1)
        defer { fixture.stop() }
        let port = fixture.simulator.port, caFile = fixture.credentials.caFile
        let closedByServer = Locked<Bool?>(nil)
        try ThreadStarter.start(name: "held-back-answer", detached: true) {
            let closed = try? withRawTLSClient(port: port, caFile: caFile) { ssl -> Bool in
                let bytes = rawHTTP2Request(authority: "127.0.0.1", finished: true, initialWindowSize: 0)
                guard SSL_write(ssl, bytes, Int32(bytes.count)) == Int32(bytes.count) else { return false }
                // Quiet after the GOAWAY until the drain time (10 s) is up: longer than one read's 5 s.
                for _ in 0..<4 where readUntilTheServerCloses(ssl) { return true }
                return false
            }
            closedByServer.withLock { $0 = closed ?? false }
        }
        #expect(await eventually { fixture.simulator.statistics.answersByStatus.values.reduce(0, +) == 1 })

        let client = try fixture.client()
        #expect(await client.connect())
        // Its answer may still go out (GOAWAY first); it is closed when the drain time is up.
        #expect(await eventually(timeout: .seconds(30)) { closedByServer.withLock { $0 } != nil })
        #expect(closedByServer.withLock { $0 } == true)
        #expect(fixture.simulator.statistics.connectionsEvicted == 1)
        #expect(fixture.simulator.statistics.connectionsRefused == 0)
        let answered = await client.exchange([fixture.request(authorization: try fixture.authorization())])
        #expect(answered.first?.statusAndReason?.status == 200)
        await client.stop()
    }

    @Test func goAwayAfterEveryNStreamsAnswersThoseAndRefusesTheRest() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(latency: .milliseconds(50), goAwayEveryStreams: 3))
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        let results = await client.exchange(Array(repeating: fixture.request(authorization: authorization), count: 5))
        try #require(results.count == 5)
        #expect(results[0..<3].allSatisfy { $0.statusAndReason?.status == 200 })
        #expect(results[3..<5].allSatisfy { $0.failure == .refused })
        #expect(await eventually { client.closeReason != nil }, "the connection closes once drained")
        #expect(fixture.simulator.statistics.goAwaysSent == 1)
        client.loop.shutdown()

        let second = try fixture.client()
        #expect(await second.connect())
        let again = await second.exchange(Array(repeating: fixture.request(authorization: authorization), count: 3))
        #expect(again.allSatisfy { $0.statusAndReason?.status == 200 })
        #expect(await eventually { second.closeReason != nil })
        second.loop.shutdown()
    }

    @Test func dropEveryNStreamsClosesWithoutGoAwayAndLosesOpenStreams() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(dropConnectionEveryStreams: 3))
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        let first = await client.exchange(Array(repeating: fixture.request(authorization: authorization), count: 2))
        #expect(first.allSatisfy { $0.statusAndReason?.status == 200 })
        let third = await client.exchange([fixture.request(authorization: authorization)])
        guard case .connectionLost? = third.first?.failure else {
            Issue.record("the third stream should be lost with the connection, got \(String(describing: third.first))")
            return
        }
        #expect(await eventually { client.closeReason != nil })
        #expect(fixture.simulator.statistics.connectionsDropped == 1)
        #expect(fixture.simulator.statistics.goAwaysSent == 0)
        client.loop.shutdown()
    }

    @Test func failureRatesAnswerWithApplesReasons() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(failureRates: [429: 1]))
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        let throttled = await client.exchange(Array(repeating: fixture.request(authorization: authorization), count: 3))
        #expect(throttled.allSatisfy { $0.statusAndReason?.status == 429 && $0.statusAndReason?.reason == .tooManyRequests })

        // Requests the rules reject keep their own answer: only a 200 becomes an injected failure.
        let rejected = await client.exchange([fixture.request(authorization: authorization, token: "abc")])
        #expect(rejected.first?.statusAndReason?.reason == .badDeviceToken)

        try fixture.simulator.setFaults(APNsSimulatorFaults(failureRates: [500: 0.5, 503: 0.5]))
        let mixed = await client.exchange(Array(repeating: fixture.request(authorization: authorization), count: 100))
        let answers = mixed.compactMap { $0.statusAndReason }
        #expect(answers.count == 100)
        #expect(answers.allSatisfy { ($0.status == 500 && $0.reason == .internalServerError)
                                     || ($0.status == 503 && $0.reason == .serviceUnavailable) })
        #expect(answers.contains { $0.status == 500 } && answers.contains { $0.status == 503 })
        let statistics = fixture.simulator.statistics
        #expect(statistics.answersByStatus[429] == 3 && statistics.answersByStatus[400] == 1)
        #expect((statistics.answersByStatus[500] ?? 0) + (statistics.answersByStatus[503] ?? 0) == 100)
        await client.stop()
    }

    @Test func stalledStreamsAreNeverAnsweredButTheConnectionLives() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(stallRate: 1))
        defer { fixture.stop() }
        let client = try fixture.client(streamTimeout: .milliseconds(500))
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        let stalled = await client.exchange([fixture.request(authorization: authorization)])
        #expect(stalled.first?.failure == .timeout)
        // The simulator may take the stream after the client gave up on it.
        #expect(await eventually { fixture.simulator.statistics.streamsStalled == 1 })

        try fixture.simulator.setFaults(APNsSimulatorFaults())
        let answered = await client.exchange([fixture.request(authorization: authorization)])
        #expect(answered.first?.statusAndReason?.status == 200)
        #expect(client.closeReason == nil)
        await client.stop()
    }

    @Test func halfOpenConnectionStopsAnsweringStreamsAndPingsButStaysUp() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(halfOpenAfterStreams: 2))
        defer { fixture.stop() }
        let client = try fixture.client(streamTimeout: .seconds(1))
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        let answered = await client.exchange(Array(repeating: fixture.request(authorization: authorization), count: 2))
        #expect(answered.allSatisfy { $0.statusAndReason?.status == 200 })
        client.ping()
        #expect(await eventually { fixture.simulator.statistics.pingsAnswered == 1 })

        let tags = await client.send([fixture.request(authorization: authorization)])
        #expect(await eventually { fixture.simulator.statistics.connectionsHalfOpened == 1 })
        client.ping()
        // The silent stream times out after a second; by then an answered PING would long have been counted.
        #expect(await eventually { client.record.withLock { $0.results[tags[0]] } != nil })
        #expect(client.record.withLock { $0.results[tags[0]] }?.failure == .timeout)
        #expect(fixture.simulator.statistics.pingsAnswered == 1)
        #expect(client.closeReason == nil, "TCP stays up")
        await client.stop()
    }

    /// Clients that give up on their half-open connections and close them: the simulator sees
    /// each close and lets the connection (and its descriptor) go.
    @Test func halfOpenConnectionsTheirClientsCloseAreReleased() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(halfOpenAfterStreams: 1))
        defer { fixture.stop() }
        let authorization = try fixture.authorization()
        for round in 1...3 {
            let client = try fixture.client()
            #expect(await client.connect())
            let answered = await client.exchange([fixture.request(authorization: authorization)])
            #expect(answered.first?.statusAndReason?.status == 200)
            _ = await client.send([fixture.request(authorization: authorization)])
            #expect(await eventually { fixture.simulator.statistics.connectionsHalfOpened == round })
            #expect(fixture.simulator.openConnections == 1)
            await client.stop()
            #expect(await eventually { fixture.simulator.openConnections == 0 }, "round \(round)")
        }
    }

    /// Requests that arrive together (one read): the ones before the limit are still answered.
    @Test func aHalfOpenConnectionAnswersTheStreamsBeforeItsLimitThatCameInTheSameRead() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(halfOpenAfterStreams: 2))
        defer { fixture.stop() }
        let client = try fixture.client(streamTimeout: .seconds(1))
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        let results = await client.exchange(Array(repeating: fixture.request(authorization: authorization), count: 3))
        #expect(results.count == 3)
        #expect(results.prefix(2).allSatisfy { $0.statusAndReason?.status == 200 }, "\(results)")
        #expect(results.last?.failure == .timeout)
        #expect(fixture.simulator.statistics.connectionsHalfOpened == 1)
        await client.stop()
    }

    @Test func tokensOlderThanTheMaximumAgeAreExpired() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(jwtMaximumAge: .seconds(30 * 60)))
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let fresh = await client.exchange([fixture.request(authorization: try fixture.authorization(issuedSecondsAgo: 29 * 60))])
        #expect(fresh.first?.statusAndReason?.status == 200)
        let old = await client.exchange([fixture.request(authorization: try fixture.authorization(issuedSecondsAgo: 31 * 60))])
        #expect(old.first?.statusAndReason?.status == 403)
        #expect(old.first?.statusAndReason?.reason == .expiredProviderToken)

        try fixture.simulator.setFaults(APNsSimulatorFaults())   // Apple's own limit is one hour
        let accepted = await client.exchange([fixture.request(authorization: try fixture.authorization(issuedSecondsAgo: 31 * 60))])
        #expect(accepted.first?.statusAndReason?.status == 200)
        await client.stop()
    }

    @Test func initialStreamLimitIsRaisedAfterTheFirstAuthenticatedRequest() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(initialMaxConcurrentStreams: 1), maxConcurrentStreams: 50)
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        #expect(await eventually { client.lastSettings == 1 })
        let unauthenticated = await client.exchange([fixture.request(authorization: nil)])
        #expect(unauthenticated.first?.statusAndReason?.reason == .missingProviderToken)
        #expect(client.lastSettings == 1)
        // Answers given before authentication ran (a bad path, duplicate headers) raise nothing either.
        var badPath = fixture.request(authorization: try fixture.authorization())
        badPath.path = "/2/device/" + sampleToken
        var duplicated = fixture.request(authorization: try fixture.authorization())
        duplicated.headers.append((name: "apns-topic", value: sampleTopic))
        for (request, reason) in [(badPath, APNsReason.badPath), (duplicated, .duplicateHeaders)] {
            #expect(await client.exchange([request]).first?.statusAndReason?.reason == reason)
            #expect(client.lastSettings == 1, "after \(reason)")
        }
        let valid = await client.exchange([fixture.request(authorization: try fixture.authorization())])
        #expect(valid.first?.statusAndReason?.status == 200)
        #expect(await eventually { client.lastSettings == 50 })

        fixture.simulator.setMaxConcurrentStreams(7)
        #expect(await eventually { client.lastSettings == 7 }, "a raised connection follows later changes")
        await client.stop()
    }

    @Test func switchingTokensSoonerThanTheIntervalIsTooManyProviderTokenUpdates() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(tokenUpdateMinimumInterval: .seconds(20 * 60)))
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let first = try fixture.authorization(issuedSecondsAgo: 60)
        let second = try fixture.authorization()
        #expect(first != second)
        #expect(await client.exchange([fixture.request(authorization: first)]).first?.statusAndReason?.status == 200)
        let tooSoon = await client.exchange([fixture.request(authorization: second)])
        #expect(tooSoon.first?.statusAndReason?.status == 429)
        #expect(tooSoon.first?.statusAndReason?.reason == .tooManyProviderTokenUpdates)
        #expect(await client.exchange([fixture.request(authorization: first)]).first?.statusAndReason?.status == 200,
                "the refused token was not taken")

        fixture.clock.advance(by: 20 * 60)
        #expect(await client.exchange([fixture.request(authorization: second)]).first?.statusAndReason?.status == 200)

        // The limit is per connection: a new connection may start with any token.
        let other = try fixture.client()
        #expect(await other.connect())
        #expect(await other.exchange([fixture.request(authorization: first)]).first?.statusAndReason?.status == 200)
        await other.stop()
        await client.stop()
    }

    @Test func clientCertificateAuthAcceptsTheCertificatesBundleWithoutAToken() async throws {
        let fixture = try SimulatorFixture(clientCertificateCommonName: "Apple Push Services: " + sampleTopic)
        defer { fixture.stop() }
        let client = try fixture.client(presentCertificate: true)
        #expect(await client.connect())
        let results = await client.exchange([
            fixture.request(authorization: nil),
            fixture.request(authorization: nil, topic: nil),
            fixture.request(authorization: nil, topic: sampleTopic + ".voip", pushType: .voip),
            fixture.request(authorization: nil, topic: sampleTopic + ".complication", pushType: .complication),
            // With certificate auth APNs ignores `authorization`, a token that is none too.
            fixture.request(authorization: "bearer not-a-token"),
            fixture.request(authorization: nil, topic: "com.example.other"),
            // A push certificate covers the bundle, .voip and .complication only.
            fixture.request(authorization: nil, topic: sampleTopic + ".share"),
            fixture.request(authorization: nil, topic: sampleTopic + ".location-query", pushType: .location),
        ])
        #expect(results.map { $0.statusAndReason?.status } == [200, 200, 200, 200, 200, 400, 400, 400])
        #expect(results.suffix(3).allSatisfy { $0.statusAndReason?.reason == .topicDisallowed })
        await client.stop()

        let anonymous = try fixture.client(presentCertificate: false)
        #expect(await anonymous.connect() == false, "the simulator requires a client certificate")
        #expect(anonymous.closeReason != nil)
        anonymous.loop.shutdown()
    }

    @Test func statisticsCountConnectionsRequestsAndThePeakOfOpenStreams() async throws {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(latency: .milliseconds(200)), maxConcurrentStreams: 5)
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        #expect(await eventually { client.lastSettings == 5 })
        let authorization = try fixture.authorization()
        let results = await client.exchange(Array(repeating: fixture.request(authorization: authorization), count: 5))
        #expect(results.count == 5)
        let statistics = fixture.simulator.statistics
        #expect(statistics.connectionsAccepted == 1)
        #expect(statistics.requestsReceived == 5)
        #expect(statistics.answersByStatus == [200: 5])
        #expect(statistics.peakOpenStreams == 5)

        fixture.simulator.resetStatistics()
        #expect(fixture.simulator.statistics == APNsSimulatorStatistics())
        await client.stop()
    }

    @Test func faultsAreValidated() throws {
        #expect(APNsSimulatorFaults().problem == nil)
        #expect(APNsSimulatorFaults(failureRates: [404: 0.1]).problem != nil)
        #expect(APNsSimulatorFaults(failureRates: [429: 0.7, 503: 0.7]).problem != nil)
        #expect(APNsSimulatorFaults(stallRate: 1.5).problem != nil)
        #expect(APNsSimulatorFaults(goAwayEveryStreams: 0).problem != nil)
        #expect(APNsSimulatorFaults(latency: .milliseconds(-1)).problem != nil)
        #expect(APNsSimulatorFaults(latency: .seconds(3600)).problem == nil)
        for tooLong in [Duration.seconds(3600) + .nanoseconds(1), .seconds(Int64.max)] {
            #expect(APNsSimulatorFaults(latency: tooLong).problem?.contains("latency") == true)
            // A token age above APNs' hour could not be kept: the verifier refuses such tokens.
            #expect(APNsSimulatorFaults(jwtMaximumAge: tooLong).problem?.contains("jwt-max-age") == true)
        }
        #expect(APNsSimulatorFaults(jwtMaximumAge: .seconds(3600)).problem == nil)
        let fixture = try SimulatorFixture()
        defer { fixture.stop() }
        #expect(throws: APNsSimulatorError.self) { try fixture.simulator.setFaults(APNsSimulatorFaults(halfOpenAfterStreams: 0)) }
        #expect(fixture.simulator.faults == APNsSimulatorFaults())
    }

    @Test func failureDrawsSplitTheUnitIntervalByStatus() {
        let faults = APNsSimulatorFaults(failureRates: [503: 0.2, 429: 0.1])
        #expect(faults.injectedFailure(draw: 0.05)?.status == 429)
        #expect(faults.injectedFailure(draw: 0.15)?.status == 503)
        #expect(faults.injectedFailure(draw: 0.29)?.reason == .serviceUnavailable)
        #expect(faults.injectedFailure(draw: 0.31) == nil)
    }
}
