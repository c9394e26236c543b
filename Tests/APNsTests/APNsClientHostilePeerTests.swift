import Foundation
import HTTP2
import Testing
import TestSupport
@testable import APNs
import APNsSimulator

/// The pool against peers that break HTTP/2 (`HostileHTTP2Peer`, real TLS on 127.0.0.1): every
/// notification gets a classified result within `max_attempts` (or, when the peer never processes
/// it, at its `expiration`), nothing waits for the stream deadline, connections are replaced only
/// for a cause, and the peer's count of requests shows the pool never spins.
@Suite(.timeLimit(.minutes(1)))
struct APNsClientHostilePeerTests {
    /// Credentials and client loops, the hostile peer, and a pool of `connections` to it.
    private struct Fixture {
        let environment: ClientEnvironment
        let peer: HostileHTTP2Peer
        let recorder = DeliveryRecorder()
        let client: APNsClient

        init(_ behaviour: HostileHTTP2Peer.Behaviour, connections: Int = 1, maxAttempts: Int) throws {
            environment = try ClientEnvironment()
            do {
                peer = try HostileHTTP2Peer(certificateFile: environment.credentials.serverCertificateFile,
                                            privateKeyFile: environment.credentials.serverPrivateKeyFile,
                                            behaviour: behaviour)
            } catch {
                environment.tearDown()
                throw error
            }
            // The stream deadline is far beyond the test's waits: no result may come from it.
            client = environment.makeClient(port: peer.port, connections: connections, delegate: recorder,
                                            requestTimeoutNanoseconds: 120_000_000_000, maxAttempts: maxAttempts)
            client.start()
        }

        /// Sends `count` notifications and waits for every result.
        func deliver(_ count: Int, expiringInSeconds: Int64? = nil) async -> Bool {
            var notifications = batch(0..<count)
            if let expiringInSeconds {
                let expiration = Int64(Date().timeIntervalSince1970) + expiringInSeconds
                for index in notifications.indices { notifications[index].notification.expiration = expiration }
            }
            client.send(notifications)
            return await eventually(timeout: .seconds(30)) { recorder.callCount >= count }
        }

        /// Expects one result per notification, each after exactly `attempts` attempts and `expected`.
        func expectResults(_ count: Int, attempts: Int, _ expected: (APNsDeliveryResult.Outcome) -> Bool) {
            let snapshot = recorder.snapshot
            #expect(recorder.callCount == count && snapshot.count == count)
            #expect(snapshot.values.allSatisfy { $0.count == 1 && $0[0].result.attempts == attempts })
            for outcome in snapshot.values.compactMap({ $0.first?.result.outcome }) where !expected(outcome) {
                Issue.record("unexpected outcome: \(outcome)")
            }
        }

        func tearDown() {
            client.shutdown()
            peer.stop()
            environment.tearDown()
        }
    }

    @Test func invalidHPACKReplacesTheConnectionAndRetriesItsStreamsUpToMaxAttempts() async throws {
        let fixture = try Fixture(.invalidHPACK(.indexBeyondTable), maxAttempts: 3)
        defer { fixture.tearDown() }
        #expect(await fixture.deliver(5))
        // Each attempt's connection died of the peer's header block: lost, retried, then failed
        // with the reason the pool logged when it replaced the connection.
        fixture.expectResults(5, attempts: 3) {
            if case .failure(.connectionLost(let reason)) = $0 { reason == "HTTP/2 protocol error: COMPRESSION_ERROR" } else { false }
        }
        #expect(fixture.recorder.retries == [.connectionLost: 10])
        // Replaced for that cause only, never in a storm: once the pool has a new connection ready
        // (no request left to break it), every earlier one ended with the client's GOAWAY
        // COMPRESSION_ERROR, and there were at least as many as attempts rounds. The peer
        // counts a connection ended once it has read the client's GOAWAY and the close after it.
        #expect(await eventually {
            let seen = fixture.peer.observations
            return fixture.client.hasReadyConnection && seen.connectionsEnded == seen.connectionsAccepted - 1
        })
        let seen = fixture.peer.observations
        #expect(seen.goAwaysReceived.allSatisfy { $0 == 0x9 })
        #expect(seen.connectionsAccepted == seen.goAwaysReceived.count + 1, "\(seen)")
        #expect(seen.goAwaysReceived.count >= 3 && seen.goAwaysReceived.count <= 5 * 3)
        #expect(seen.headersReceived == 15)
    }

    @Test func endlessDataIsCutAtTheBodyCapAndTheAnswerClassifiedFromItsStatus() async throws {
        let fixture = try Fixture(.endlessData(status: 500), maxAttempts: 3)
        defer { fixture.tearDown() }
        #expect(await fixture.deliver(4))
        // 500 is retried until max_attempts, then reported with its status (the cut body is not JSON).
        fixture.expectResults(4, attempts: 3) {
            if case .response(let response) = $0 { response.status == 500 && response.reason == nil } else { false }
        }
        #expect(fixture.recorder.retries == [.status5xx: 8])
        // Every stream was reset (CANCEL) once past the 16 KiB cap, within its first window; the
        // connection stayed: resetting a stream costs nothing else.
        #expect(await eventually { fixture.peer.observations.resetsReceived.count == 12 })
        let seen = fixture.peer.observations
        #expect(Set(seen.resetsReceived.values) == [0x8])
        let sent = fixture.peer.dataBytesSentOnStreams
        #expect(sent.notReset.isEmpty && sent.reset.count == 12)
        #expect(sent.reset.allSatisfy { $0 > APNsConnectionPool.maxResponseBodyBytes && $0 <= 65_535 })
        #expect(seen.connectionsAccepted == 1 && seen.goAwaysReceived.isEmpty && seen.headersReceived == 12, "\(seen)")
    }

    @Test func aPeerIgnoringResetsLosesItsConnectionAndThePoolReconnects() async throws {
        let fixture = try Fixture(.endlessData(status: 200, ignoringResets: true), maxAttempts: 3)
        defer { fixture.tearDown() }
        #expect(await fixture.deliver(4))
        // Each answer is its status: delivered at the first attempt, the body cut at 16 KiB.
        fixture.expectResults(4, attempts: 1) {
            if case .response(let response) = $0 { response.status == 200 } else { false }
        }
        // The peer kept sending on the reset streams: past the discard cap the client ended the
        // connection (why: `HostilePeerTests/aPeerIgnoringResetsIsCutOffAfterTheConnectionsDiscardCap`;
        // its GOAWAY may not reach a peer busy writing) and the pool opened another, with nothing to send.
        #expect(await eventually {
            let seen = fixture.peer.observations
            return seen.connectionsEnded == 1 && seen.connectionsAccepted == 2 && fixture.client.hasReadyConnection
        }, "\(fixture.peer.observations)")
        let sent = fixture.peer.observations.dataBytesSent.values.reduce(0, +)
        #expect(sent <= Int(HTTP2Session.connectionWindowSize) + Int(HTTP2Session.connectionWindowSize) / 2)
    }

    @Test func resetStreamsAreRetriedUpToMaxAttemptsAndAFloodOfResetsIsIgnored() async throws {
        // INTERNAL_ERROR and CANCEL in turn, each followed by 100 resets of streams already closed.
        let fixture = try Fixture(.resetStreams(codes: [0x2, 0x8], closedStreamFlood: 100), maxAttempts: 3)
        defer { fixture.tearDown() }
        #expect(await fixture.deliver(10))
        fixture.expectResults(10, attempts: 3) {
            if case .failure(.reset(let code)) = $0 { code == 0x2 || code == 0x8 } else { false }
        }
        // A reset stream may have been processed: an attempt each time, so exactly 3 requests per
        // notification; the 3,000 resets of closed streams cost neither a request nor the connection.
        #expect(fixture.recorder.retries == [.streamReset: 20])
        let seen = fixture.peer.observations
        #expect(seen.headersReceived == 30 && seen.resetsSent == 30 * 101)
        #expect(seen.connectionsAccepted == 1 && seen.goAwaysReceived.isEmpty, "\(seen)")
    }

    @Test func refusedStreamsAreResentWithoutCountingAndWithoutSpinningUntilTheyExpire() async throws {
        let fixture = try Fixture(.resetStreams(codes: [0x7], closedStreamFlood: 20), maxAttempts: 3)
        defer { fixture.tearDown() }
        // A peer refusing everything: not one request was processed, so none is an attempt, and
        // the notifications end, not sent (expired), when the next re-send would come after
        // their expiration.
        #expect(await fixture.deliver(5, expiringInSeconds: 6))
        fixture.expectResults(5, attempts: 0) { $0.isExpired }
        let quick = APNsDeliveryStateMachine.Configuration(maxAttempts: 3, retryBackoff: .init(
            initial: .milliseconds(10), maximum: .milliseconds(100))).quickNotProcessedResends
        let requests = fixture.peer.observations.headersReceived
        // More re-sends than maxAttempts and the quick ones, yet spaced: after the quick ones, at
        // most one per half second.
        #expect(requests > 5 * (quick + 1) && requests <= 5 * (quick + 1 + 6_000 / 500), "\(requests)")
        #expect(fixture.peer.observations.connectionsAccepted == 1, "\(fixture.peer.observations)")
    }

    @Test func aGoAwayBeforeEveryRequestIsResentWithoutAReconnectStormUntilItExpires() async throws {
        let fixture = try Fixture(.goAwayBeforeEveryRequest, maxAttempts: 3)
        defer { fixture.tearDown() }
        #expect(await fixture.deliver(5, expiringInSeconds: 6))
        // The GOAWAY rule is the refusal rule: never processed, never an attempt, so expired.
        fixture.expectResults(5, attempts: 0) { $0.isExpired }
        // A connection is replaced only after its GOAWAY: no more than one per request round,
        // plus the one open now.
        let seen = fixture.peer.observations
        #expect(seen.headersReceived > 5 * 4, "\(seen)")
        #expect(seen.goAwaysSent >= 4 && seen.connectionsAccepted <= seen.goAwaysSent + 1, "\(seen)")
    }

    /// A connection whose drain after a GOAWAY the network cuts short (the stream the GOAWAY
    /// would still answer is lost with the connection) is reported closed as lost, with the
    /// network's reason, not as a GOAWAY's graceful end: its stream is an attempt, retried.
    @Test func aDrainCutShortIsALostConnectionNotAGoAway() async throws {
        let fixture = try Fixture(.goAwayThenEndOfStream, maxAttempts: 2)
        defer { fixture.tearDown() }
        #expect(await fixture.deliver(1))
        fixture.expectResults(1, attempts: 2) {
            if case .failure(.connectionLost) = $0 { true } else { false }
        }
        #expect(await eventually { fixture.recorder.connectionCloses.count >= 2 })
        let closes = fixture.recorder.connectionCloses
        #expect(closes.allSatisfy { if case .lost = $0 { true } else { false } }, "\(closes)")
    }

    /// A whole answer that came before the request's body went out (the peer answers 503 at the
    /// HEADERS and never opens the stream's window) stays with its open stream. When the client
    /// shuts down then, the 503 is not reported as the notification's final failure after one
    /// attempt: nothing is sent again at shutdown, so it ends unanswered ("client is shutting
    /// down"), as the notifications still waiting do, and the bridge leaves its record
    /// uncommitted. Once its attempts are used up, the 503 is the result as ever.
    @Test(arguments: [5, 1])
    func aRetriableAnswerStillOnItsStreamAtShutdownEndsUnanswered(maxAttempts: Int) async throws {
        let fixture = try Fixture(.answerBeforeBody(status: 503), maxAttempts: maxAttempts)
        defer { fixture.tearDown() }
        var notifications = batch(0..<1)
        // Longer than the 64 KiB stream window the peer never opens.
        notifications[0].notification.payload = Array(repeating: UInt8(ascii: " "), count: 100_000)
        fixture.client.send(notifications)
        // The client has read the answer once it acknowledged the PING sent after it.
        #expect(await eventually { fixture.peer.observations.pingAcksReceived == 1 })
        #expect(fixture.peer.observations.headersReceived == 1 && fixture.recorder.callCount == 0)
        fixture.client.shutdown()
        #expect(await eventually { fixture.recorder.callCount == 1 })
        fixture.expectResults(1, attempts: 1) { outcome in
            switch outcome {
            case .failure(.connectionLost(let reason)): maxAttempts > 1 && reason == APNsDeliveryStateMachine.shutdownReason
            case .response(let response): maxAttempts == 1 && response.status == 503
            default: false
            }
        }
    }
}

extension APNsDeliveryResult.Outcome {
    fileprivate var isExpired: Bool {
        if case .expired = self { true } else { false }
    }
}
