import Foundation
@testable import HTTP2
import Synchronization
import Testing
import TestSupport
@testable import APNs
import APNsSimulator
import Observability

/// Records every delegate call by tag (a tag finished twice shows up as two entries), and as
/// the client's observer every answer, retry and connection close.
final class DeliveryRecorder: APNsClientDelegate, APNsClientObserver {
    struct Delivery {
        let token: String
        let result: APNsDeliveryResult
    }

    private let deliveries = Locked<[UInt64: [Delivery]]>([:])
    private let calls = Atomic<Int>(0)

    func apnsClient(_ client: APNsClient, didFinish notification: APNsNotification, tag: UInt64, result: APNsDeliveryResult) {
        deliveries.withLock { $0[tag, default: []].append(Delivery(token: notification.token, result: result)) }
        calls.add(1, ordering: .relaxed)
    }

    private let retryCauses = Locked<[APNsRetryCause: Int]>([:])
    private let statuses = Locked<[Int: Int]>([:])

    func apnsRetrying(_ cause: APNsRetryCause) {
        retryCauses.withLock { $0[cause, default: 0] += 1 }
    }

    func apnsAnswered(status: Int, reason: String?, durationNanoseconds: Int64) {
        statuses.withLock { $0[status, default: 0] += 1 }
    }

    private let closeReasons = Locked<[APNsConnectionCloseReason]>([])

    func apnsConnectionClosed(_ reason: APNsConnectionCloseReason) {
        closeReasons.withLock { $0.append(reason) }
    }

    /// `apnsConnectionClosed` calls, in order.
    var connectionCloses: [APNsConnectionCloseReason] { closeReasons.withLock { $0 } }

    /// `apnsRetrying` calls by cause.
    var retries: [APNsRetryCause: Int] { retryCauses.withLock { $0 } }
    /// `apnsAnswered` calls by status.
    var answers: [Int: Int] { statuses.withLock { $0 } }

    /// Delegate calls so far.
    var callCount: Int { calls.load(ordering: .relaxed) }

    /// Every delivery so far, by tag.
    var snapshot: [UInt64: [Delivery]] { deliveries.withLock { $0 } }
}

/// Records like `DeliveryRecorder` and shuts the client down from inside its first callback,
/// on the connection's loop thread.
private final class ShutdownOnFirstAnswer: APNsClientDelegate {
    let recorder = DeliveryRecorder()
    private let shutDown = Atomic<Bool>(false)

    func apnsClient(_ client: APNsClient, didFinish notification: APNsNotification, tag: UInt64, result: APNsDeliveryResult) {
        recorder.apnsClient(client, didFinish: notification, tag: tag, result: result)
        if !shutDown.exchange(true, ordering: .relaxed) {
            client.shutdown()
        }
    }
}

/// An HTTP/2 server over TLS that takes requests and never answers them (keeps the responders).
final class SilentHandler: HTTP2ServerHandler {
    private let held = Locked<[HTTP2Responder]>([])

    func handle(_ request: HTTP2ServerRequest, responder: HTTP2Responder) {
        held.withLock { $0.append(responder) }
    }

    /// Requests received so far.
    var receivedCount: Int { held.withLock { $0.count } }

    /// Drops the held responders (they keep their server connections alive).
    func releaseAll() {
        held.withLock { $0.removeAll() }
    }
}

/// An HTTP/2 + TLS server whose handler never answers, on a loop of its own.
final class SilentServer: Sendable {
    let server: HTTP2Server
    let handler = SilentHandler()
    private let group: EventLoopGroup

    init(credentials: TestCredentials, maxConcurrentStreams: Int) throws {
        group = try EventLoopGroup(threads: 1, name: "silent-server")
        do {
            server = try HTTP2Server(
                host: "127.0.0.1", port: 0,
                tls: TLSServerContext(certificateFile: credentials.serverCertificateFile,
                                      privateKeyFile: credentials.serverPrivateKeyFile),
                group: group, maxConcurrentStreams: maxConcurrentStreams, handler: handler)
        } catch {
            group.shutdown()
            throw error
        }
    }

    func stop() {
        server.close()
        group.shutdown()
        handler.releaseAll()
    }
}

/// Credentials, client TLS, token provider and client loops shared by one test.
struct ClientEnvironment {
    let scratch: ScratchDirectory
    let credentials: TestCredentials
    let tls: TLSClientContext
    let tokenProvider: APNsTokenProvider
    let group: EventLoopGroup

    /// `tokenClock` (Unix seconds) dates the provider tokens; nil: the system clock.
    init(tokenClock: (@Sendable () -> Int64)? = nil) throws {
        scratch = try ScratchDirectory()
        credentials = try TestCredentials.generate(in: scratch.path)
        tls = try TLSClientContext(TLSClientConfiguration(caFile: credentials.caFile))
        let signer = JWTSigner(key: try APNsSigningKey(pemFile: credentials.authKeyFile),
                               keyID: credentials.keyID, teamID: credentials.teamID)
        tokenProvider = tokenClock.map { APNsTokenProvider(signer: signer, clock: $0) } ?? APNsTokenProvider(signer: signer)
        group = try EventLoopGroup(threads: 2, name: "apns-client-test")
    }

    func makeClient(
        port: Int, connections: Int, delegate: APNsClientDelegate,
        requestTimeoutNanoseconds: UInt64 = 10_000_000_000, maxAttempts: Int = 5,
        pingInterval: Duration = .seconds(60), pingTimeout: Duration = .seconds(10),
        clock: any APNsClock = APNsSystemClock()
    ) -> APNsClient {
        let configuration = APNsClientConfiguration(
            host: "127.0.0.1", port: port, connections: connections,
            requestTimeoutNanoseconds: requestTimeoutNanoseconds,
            reconnectDelayNanoseconds: 10_000_000, maxReconnectDelayNanoseconds: 50_000_000,
            pingInterval: pingInterval, pingTimeout: pingTimeout,
            maxAttempts: maxAttempts, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(100))
        return APNsClient(name: "test/sandbox", configuration: configuration, tls: tls, group: group,
                          tokenProvider: tokenProvider, delegate: delegate, observer: delegate as? APNsClientObserver,
                          clock: clock)
    }

    /// A simulator on the test credentials, started.
    func startSimulator() throws -> APNsSimulator {
        let simulator = try APNsSimulator(configuration: credentials.simulatorConfiguration())
        try simulator.start()
        return simulator
    }

    /// A server on the test certificate that never answers, with its own loop.
    func startSilentServer(maxConcurrentStreams: Int) throws -> SilentServer {
        try SilentServer(credentials: credentials, maxConcurrentStreams: maxConcurrentStreams)
    }

    func tearDown() {
        group.shutdown()
        scratch.remove()
    }
}

/// A distinct valid device token for `index`.
func deviceToken(_ index: Int) -> String {
    String(format: "%064lx", index)
}

/// A canonical apns-id for `index`, echoed by the simulator so answers can be matched to tags.
func apnsID(_ index: Int) -> String {
    String(format: "00000000-0000-4000-8000-%012lx", index)
}

func notification(token: String, id: String? = nil) -> APNsNotification {
    APNsNotification(token: token, topic: sampleTopic, apnsID: id, payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
}

/// Pending notifications for tags `range`, each to `deviceToken(tag)` with `apnsID(tag)`.
func batch(_ range: Range<Int>) -> [APNsPendingNotification] {
    range.map { APNsPendingNotification(notification: notification(token: deviceToken($0), id: apnsID($0)), tag: UInt64($0)) }
}

/// The status of a single `.response`, or nil.
func status(_ deliveries: [DeliveryRecorder.Delivery]?) -> Int? {
    guard let deliveries, deliveries.count == 1, case .response(let response) = deliveries[0].result.outcome else { return nil }
    return response.status
}

/// Expects tags `range` each answered exactly once with 200 and their own apns-id and token.
func expectDelivered(_ recorder: DeliveryRecorder, _ range: Range<Int>) {
    let snapshot = recorder.snapshot
    var wrong = 0
    var example = ""
    for index in range {
        guard let deliveries = snapshot[UInt64(index)], deliveries.count == 1,
              case .response(let response) = deliveries[0].result.outcome, response.status == 200,
              response.apnsID == apnsID(index), deliveries[0].token == deviceToken(index) else {
            if wrong == 0 { example = "tag \(index): \(snapshot[UInt64(index)].map { $0.map { "\($0.result)" } } ?? [])" }
            wrong += 1
            continue
        }
    }
    #expect(wrong == 0, "\(wrong) of \(range.count) notifications not answered exactly once with their 200; \(example)")
}

/// Whether any connection of `client` is ready.
private func anySlotConnected(_ client: APNsClient) async -> Bool {
    client.hasReadyConnection
}

/// The most streams a connection of the pool ever had open at once, read on its loop.
private func peakActiveStreams(_ client: APNsClient) async -> Int {
    await onPoolLoop(client) { client.pool.members.map(\.peakActiveStreams).max() ?? 0 }
}

/// The system clocks with the monotonic reading's origin moved: the pool only ever compares its
/// readings with each other, so any origin must do.
private struct ShiftedOriginClock: APNsClock {
    let shiftNanoseconds: Int64

    func now() -> APNsInstant {
        var instant = APNsSystemClock().now()
        instant.nanoseconds &+= shiftNanoseconds
        return instant
    }
}

@Suite struct APNsClientTests {
    /// Frames are stamped by the connection on a clock of its own; the pool dates them on its
    /// injected clock by their age. Dated by the connection's stamp, an origin an hour behind
    /// put every frame an hour ahead of the pool's now, and no idle PING went out for an hour.
    @Test(.timeLimit(.minutes(1)))
    func anIdleConnectionIsPingedWhateverThePoolClocksOrigin() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try environment.startSimulator()
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(
            port: simulator.port, connections: 1, delegate: recorder, pingInterval: .milliseconds(300),
            clock: ShiftedOriginClock(shiftNanoseconds: -3_600_000_000_000))
        defer { client.shutdown() }
        client.start()

        client.send(batch(0..<5))
        #expect(await eventually { recorder.callCount >= 5 })
        expectDelivered(recorder, 0..<5)
        // Quiet from here on: the PING follows ping_interval after the last answer.
        let answered = simulator.statistics.pingsAnswered
        #expect(await eventually(timeout: .seconds(10)) { simulator.statistics.pingsAnswered > answered })
        #expect(client.hasReadyConnection)
    }

    @Test(.timeLimit(.minutes(1)))
    func deliversFiveThousandOverTwoConnectionsExactlyOnce() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try environment.startSimulator()
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 2, delegate: recorder)
        defer { client.shutdown() }
        client.start()

        let total = 5_000
        var sent = 0
        for size in [1, 7, 992, 2_000, 2_000] {   // single sends and multi-slot batches
            client.send(batch(sent..<(sent + size)))
            sent += size
        }
        #expect(sent == total)
        #expect(client.queuedCount > 0)   // counted by `send` itself
        #expect(await eventually { recorder.callCount >= total && client.queuedCount == 0 })
        expectDelivered(recorder, 0..<total)
        #expect(recorder.callCount == total)
        #expect(client.queuedCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func answersValidUnregisteredAndMalformedTokensPerTag() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let unregistered = String(repeating: "0f", count: 32)
        var configuration = environment.credentials.simulatorConfiguration()
        configuration.unregisteredTokens = [unregistered: 1_700_000_000_123]
        let simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 2, delegate: recorder)
        defer { client.shutdown() }
        client.start()

        // Tag % 3: 0 valid, 1 unregistered, 2 malformed (too short, not hex).
        let tokens = (0..<30).map { [deviceToken($0), unregistered, "not-a-token-\($0)"][$0 % 3] }
        client.send(tokens.enumerated().map {
            APNsPendingNotification(notification: notification(token: $0.element), tag: UInt64($0.offset))
        })
        #expect(await eventually { recorder.callCount >= tokens.count })

        let snapshot = recorder.snapshot
        for (index, token) in tokens.enumerated() {
            let deliveries = try #require(snapshot[UInt64(index)])
            try #require(deliveries.count == 1)
            #expect(deliveries[0].token == token)
            guard case .response(let response) = deliveries[0].result.outcome else {
                Issue.record("tag \(index): no response")
                continue
            }
            switch index % 3 {
            case 0:
                #expect(response.status == 200 && response.reason == nil)
            case 1:
                #expect(response.status == 410 && response.reason == .unregistered)
                #expect(response.timestamp == 1_700_000_000_123)
            default:
                #expect(response.status == 400 && response.reason == .badDeviceToken)
            }
        }
        #expect(recorder.callCount == tokens.count)
        #expect(client.queuedCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func obeysTheServersConcurrentStreamLimit() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        var configuration = environment.credentials.simulatorConfiguration()
        configuration.maxConcurrentStreams = 3
        let simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 1, delegate: recorder)
        defer { client.shutdown() }
        client.start()

        client.send(batch(0..<300))
        #expect(await eventually { recorder.callCount >= 300 })
        expectDelivered(recorder, 0..<300)
        let peak = await peakActiveStreams(client)
        #expect(peak >= 1 && peak <= 3)

        // Lowered at runtime: the connection keeps working under the new limit.
        simulator.setMaxConcurrentStreams(1)
        client.send(batch(300..<400))
        #expect(await eventually { recorder.callCount >= 400 })
        expectDelivered(recorder, 0..<400)
        #expect(client.queuedCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func deliversWhatWasQueuedWhileTheServerWasUnreachable() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        // Nothing listens on the reserved port until the simulator starts.
        let reservation = try PortReservation()
        defer { reservation.release() }
        let port = reservation.port

        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: port, connections: 2, delegate: recorder)
        defer { client.shutdown() }
        client.start()
        client.send(batch(0..<50))
        #expect(client.queuedCount == 50)
        #expect(recorder.callCount == 0)
        // Down: the connections back off and retry connecting; nothing is ready, nothing fails.
        #expect(await eventually { (client.connectionStates[.backoff] ?? 0) > 0 })
        #expect(!client.hasReadyConnection)
        #expect(recorder.callCount == 0)

        let first = try APNsSimulator(configuration: environment.credentials.simulatorConfiguration(port: port))
        try first.start()
        #expect(await eventually { recorder.callCount >= 50 })
        expectDelivered(recorder, 0..<50)
        // Connecting is not an attempt.
        #expect(recorder.snapshot.values.allSatisfy { $0[0].result.attempts == 1 })
        #expect(await eventually { client.connectionStates[.ready] == 2 && client.hasReadyConnection })

        // Closed and restarted: the slots reconnect and deliver what was sent in between.
        first.close()
        #expect(await eventuallyAsync { await !anySlotConnected(client) })
        client.send(batch(50..<100))
        #expect(client.queuedCount == 50)
        let second = try APNsSimulator(configuration: environment.credentials.simulatorConfiguration(port: port))
        try second.start()
        defer { second.close() }
        #expect(await eventually { recorder.callCount >= 100 })
        // Sent after the close: queued until a connection was back, so none was lost in flight.
        expectDelivered(recorder, 0..<100)
        #expect(client.queuedCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func shutdownFailsQueuedNotificationsOnceWithoutAServer() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let reservation = try PortReservation()   // bound, never listening: connecting is refused
        defer { reservation.release() }
        let port = reservation.port

        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: port, connections: 2, delegate: recorder)
        client.start()
        client.send(batch(0..<40))
        client.shutdown()

        #expect(recorder.callCount == 40)
        try expectEachFinishedOnce(recorder, tags: 0..<40) { if case .failure(.connectionLost) = $0 { true } else { false } }
        #expect(client.queuedCount == 0)

        // After shutdown, new notifications fail at once.
        client.send(batch(40..<41))
        #expect(await eventually { recorder.callCount >= 41 })
        guard case .failure(.connectionLost)? = recorder.snapshot[40]?.first?.result.outcome else {
            Issue.record("a notification sent after shutdown did not fail")
            return
        }
        #expect(client.queuedCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func shutdownFailsInFlightAndQueuedNotificationsOnce() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let silent = try environment.startSilentServer(maxConcurrentStreams: 2)
        defer { silent.stop() }
        let (server, handler) = (silent.server, silent.handler)
        let recorder = DeliveryRecorder()
        // A deadline far beyond the test's waits: nothing may finish before shutdown, however
        // slowly a loaded machine schedules this test.
        let client = environment.makeClient(
            port: server.port, connections: 1, delegate: recorder, requestTimeoutNanoseconds: 300_000_000_000
        )
        client.start()
        client.send(batch(0..<5))
        // Two streams reach the server (its limit), three stay queued.
        #expect(await eventually { handler.receivedCount >= 2 })
        #expect(handler.receivedCount == 2)
        #expect(client.queuedCount == 5)
        client.shutdown()

        #expect(recorder.callCount == 5)
        try expectEachFinishedOnce(recorder, tags: 0..<5) { if case .failure(.connectionLost) = $0 { true } else { false } }
        #expect(client.queuedCount == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func shutdownFromTheDelegateOnTheLoopThreadDoesNotDeadlock() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let silent = try environment.startSilentServer(maxConcurrentStreams: 2)
        defer { silent.stop() }
        let (server, handler) = (silent.server, silent.handler)
        let delegate = ShutdownOnFirstAnswer()
        let client = environment.makeClient(port: server.port, connections: 1, delegate: delegate,
                                            requestTimeoutNanoseconds: 100_000_000)
        client.start()
        client.send(batch(0..<6))
        // The first timeout shuts the pool down from the loop; the rest fail once each.
        #expect(await eventually { delegate.recorder.callCount >= 6 && client.queuedCount == 0 })
        // The server may read the request after the client gave up on it.
        #expect(await eventually { handler.receivedCount >= 1 })
        let snapshot = delegate.recorder.snapshot
        #expect(snapshot.count == 6 && snapshot.values.allSatisfy { $0.count == 1 })
        let failures = snapshot.values.filter {
            if case .failure = $0[0].result.outcome { return true }
            return false
        }
        #expect(failures.count == 6)
        client.shutdown()   // idempotent, from the test thread
        #expect(delegate.recorder.callCount == 6)
    }

    @Test(.timeLimit(.minutes(1)))
    func retriesATimedOutStreamThenReportsTheTimeoutWithItsAttempts() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let silent = try environment.startSilentServer(maxConcurrentStreams: 100)
        defer { silent.stop() }
        let (server, handler) = (silent.server, silent.handler)
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: server.port, connections: 1, delegate: recorder,
                                            requestTimeoutNanoseconds: 150_000_000, maxAttempts: 2)
        defer { client.shutdown() }
        client.start()
        client.send(batch(0..<3))
        // Each stream times out, is sent once more, times out again: two requests each.
        #expect(await eventually { handler.receivedCount == 6 && recorder.callCount >= 3 })

        try expectEachFinishedOnce(recorder, tags: 0..<3) { if case .failure(.timeout) = $0 { true } else { false } }
        #expect(recorder.snapshot.values.allSatisfy { $0[0].result.attempts == 2 })
        #expect(client.queuedCount == 0)
    }
}

@Suite(.serialized)
struct APNsClientStreamIDTests {
    @Test(.timeLimit(.minutes(1)))
    func aConnectionWithItsStreamIDsUsedUpIsReplaced() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let simulator = try environment.startSimulator()
        defer { simulator.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: simulator.port, connections: 1, delegate: recorder)
        client.start()
        client.send(batch(0..<1))
        #expect(await eventually { recorder.callCount >= 1 })

        // Leave the connection two stream ids (the largest odd ids), then send five more.
        let first = try #require(await onPoolLoop(client) { client.pool.members[0].connection })
        #expect(await onPoolLoop(client) { first.setNextStreamIDForTesting(2_147_483_645) })
        client.send(batch(1..<6))

        #expect(await eventually { recorder.callCount >= 6 })
        try expectEachFinishedOnce(recorder, tags: 0..<6) { if case .response(let response) = $0 { response.status == 200 } else { false } }
        let current = await onPoolLoop(client) { client.pool.members[0].connection }
        #expect(current !== first, "the spent connection was not replaced")
        #expect(recorder.connectionCloses == [.streamIDsExhausted])
    }
}

/// Each tag finished exactly once, with a result that `matches`.
func expectEachFinishedOnce(
    _ recorder: DeliveryRecorder, tags: Range<Int>, sourceLocation: SourceLocation = #_sourceLocation,
    _ matches: (APNsDeliveryResult.Outcome) -> Bool
) throws {
    let snapshot = recorder.snapshot
    for tag in tags {
        let deliveries = try #require(snapshot[UInt64(tag)], sourceLocation: sourceLocation)
        try #require(deliveries.count == 1, sourceLocation: sourceLocation)
        #expect(matches(deliveries[0].result.outcome), "tag \(tag): \(deliveries[0].result)", sourceLocation: sourceLocation)
    }
}

/// Runs `body` on the pool's loop and returns its value.
func onPoolLoop<T: Sendable>(_ client: APNsClient, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        client.pool.loop.execute { continuation.resume(returning: body()) }
    }
}
