@testable import HTTP2
import APNsSimulator
import Synchronization
import Testing
import Observability

/// Loop-thread state of a test that keeps a connection full of requests.
final class RequestPump: @unchecked Sendable {
    let total: UInt64
    let path: String
    var next: UInt64 = 0
    var maxActive = 0
    var refusedSubmits = 0

    init(total: UInt64, path: String = "/echo") {
        self.total = total
        self.path = path
    }

    /// Submits until the connection has no free stream or everything was sent. Loop thread.
    func fill(_ connection: HTTP2ClientConnection) {
        while next < total && connection.availableStreams > 0 {
            guard connection.submit(testRequest(tag: next, path: path), tag: next) else { break }
            next += 1
            maxActive = max(maxActive, connection.activeStreams)
        }
        if next < total && connection.isReady && !connection.submit(testRequest(tag: next, path: path), tag: next) {
            refusedSubmits += 1
        } else if next < total && connection.isReady {
            next += 1
            maxActive = max(maxActive, connection.activeStreams)
        }
        connection.flush()
    }
}

@Suite struct HTTP2ClientServerTests {
    @Test(.timeLimit(.minutes(1)))
    func twoThousandConcurrentStreamsAreAllAnswered() async throws {
        let pair = try ClientServerPair(maxConcurrentStreams: 100)
        defer { pair.tearDown() }
        let client = pair.client
        let pump = try await client.sendEchoRequests(2000)
        let maxActive = await onLoop(client.loop) { pump.maxActive }
        #expect(maxActive <= 100)
        #expect(maxActive > 1)
        #expect(client.delegate.record.withLock { $0.settings } == [100])
        try await client.stop()
        #expect(client.delegate.closeReason == "connection closed by client")
    }

    @Test(.timeLimit(.minutes(1)))
    func eachAnswerGetsOnlyItsOwnHeadersWhenTheListIsReused() async throws {
        let pair = try ClientServerPair(maxConcurrentStreams: 50)
        defer { pair.tearDown() }
        let client = pair.client
        client.delegate.copiesHeaders = true
        _ = try await client.sendEchoRequests(500)
        for tag in UInt64(0)..<500 {
            guard case .success(let response)? = client.delegate.result(tag) else { break }
            #expect(response.headers.map(\.name) == ["x-path", "content-type"])
        }
        // The last answer's list, emptied, waits for the next answer's headers.
        let connection = client.connection
        let spare = await onLoop(client.loop) { (count: connection.spareHeaders.count, capacity: connection.spareHeaders.capacity) }
        #expect(spare.count == 0)
        #expect(spare.capacity >= 2)
        try await client.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func streamWithoutAnswerTimesOutAndTheConnectionStaysUsable() async throws {
        // A second: the answered stream after it must beat it too, under a sanitizer.
        let pair = try ClientServerPair(streamTimeoutNanoseconds: 1_000_000_000)
        defer { pair.tearDown() }
        let client = pair.client
        #expect(try await client.connect())

        #expect(await client.submit(testRequest(tag: 1, path: "/never"), tag: 1))
        #expect(await eventually { client.delegate.result(1) != nil })
        #expect(client.delegate.failure(1) == .timeout)
        let connection = client.connection
        let activeAfterTimeout = await onLoop(client.loop) { connection.activeStreams }
        #expect(activeAfterTimeout == 0)

        #expect(await client.submit(testRequest(tag: 2), tag: 2))
        #expect(await eventually { client.delegate.result(2) != nil })
        guard case .success(let response)? = client.delegate.result(2) else {
            Issue.record("second stream failed")
            return
        }
        #expect(response.status == 200)
        try await client.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func serverCloseFinishesOpenStreamsAsConnectionLost() async throws {
        let pair = try ClientServerPair()
        defer { pair.tearDown() }
        let (server, client) = (pair.server, pair.client)
        #expect(try await client.connect())
        for tag in UInt64(1)...3 {
            #expect(await client.submit(testRequest(tag: tag, path: "/never"), tag: tag))
        }
        #expect(await eventually { server.handler.received == 3 })

        server.server.close()
        #expect(await eventually { client.delegate.closeReason != nil })
        for tag in UInt64(1)...3 {
            guard case .failure(.connectionLost)? = client.delegate.result(tag) else {
                Issue.record("stream \(tag): \(String(describing: client.delegate.result(tag)))")
                continue
            }
        }
        #expect(client.delegate.finishCount == 3)
        #expect(client.delegate.record.withLock { $0.finishedAfterClose } == false)
        let connection = client.connection
        let readyAfterClose = await onLoop(client.loop) { connection.isReady }
        #expect(readyAfterClose == false)
        #expect(await client.submit(testRequest(tag: 9), tag: 9) == false)
        client.loop.shutdown()
    }

    @Test(.timeLimit(.minutes(1)))
    func clientCloseFinishesOpenStreamsExactlyOnce() async throws {
        let pair = try ClientServerPair()
        defer { pair.tearDown() }
        let (server, client) = (pair.server, pair.client)
        #expect(try await client.connect())
        #expect(await client.submit(testRequest(tag: 1, path: "/never"), tag: 1))
        #expect(await client.submit(testRequest(tag: 2, path: "/never"), tag: 2))
        try await client.stop()
        #expect(client.delegate.failure(1) == .connectionLost("connection closed by client"))
        #expect(client.delegate.failure(2) == .connectionLost("connection closed by client"))
        #expect(client.delegate.finishCount == 2)
        // The server forgets the connection once the client is gone.
        #expect(await eventually { server.handler.received == 2 })
    }

    @Test(.timeLimit(.minutes(1)))
    func requestsThatNeverLeftAreReportedRefusedOnClose() async throws {
        let pair = try ClientServerPair()
        defer { pair.tearDown() }
        let (server, client) = (pair.server, pair.client)
        #expect(try await client.connect())
        let connection = client.connection
        // Submitted and closed in one loop task: nothing was written, so the server saw nothing.
        let accepted = await onLoop(client.loop) { () -> Bool in
            let first = connection.submit(testRequest(tag: 1, path: "/never"), tag: 1)
            let second = connection.submit(testRequest(tag: 2, path: "/never"), tag: 2)
            connection.close()
            return first && second
        }
        #expect(accepted)
        #expect(await eventually { client.delegate.finishCount == 2 })
        #expect(client.delegate.failure(1) == .refused)
        #expect(client.delegate.failure(2) == .refused)
        #expect(server.handler.received == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func loweredMaxConcurrentStreamsIsObeyed() async throws {
        let pair = try ClientServerPair(maxConcurrentStreams: 100)
        defer { pair.tearDown() }
        let (server, client) = (pair.server, pair.client)
        #expect(try await client.connect())

        server.server.setMaxConcurrentStreams(5)
        #expect(await eventually { client.delegate.record.withLock { $0.settings.last } == 5 })
        let connection = client.connection
        let maxConcurrent = await onLoop(client.loop) { connection.maxConcurrentStreams }
        #expect(maxConcurrent == 5)

        let pump = RequestPump(total: 60, path: "/slow")
        client.delegate.onFinish = { pump.fill($0) }
        client.loop.execute { pump.fill(connection) }
        #expect(await eventually { client.delegate.finishCount == 60 })
        let (maxActive, refusedSubmits) = await onLoop(client.loop) { (pump.maxActive, pump.refusedSubmits) }
        #expect(maxActive == 5)
        #expect(refusedSubmits > 0)
        #expect(server.handler.stats.withLock { $0.maxInFlight } <= 5)
        for tag in UInt64(0)..<60 {
            guard case .success? = client.delegate.result(tag) else {
                Issue.record("stream \(tag) failed")
                break
            }
        }
        try await client.stop()
    }

    /// A server announcing far more than APNs' 1000 streams (here 2^31) still gets at most 1000
    /// open at once on one connection.
    @Test(.timeLimit(.minutes(1)))
    func aServerAnnouncingMoreThanAThousandStreamsGetsAThousandAtMost() async throws {
        let pair = try ClientServerPair(maxConcurrentStreams: 1 << 31)
        defer { pair.tearDown() }
        let (server, client) = (pair.server, pair.client)
        #expect(try await client.connect())
        #expect(client.delegate.record.withLock { $0.settings } == [HTTP2ClientConnection.maxStreamsPerConnection])

        let connection = client.connection
        let attempts = HTTP2ClientConnection.maxStreamsPerConnection + 200
        let (accepted, active, available) = await onLoop(client.loop) {
            let accepted = (0..<UInt64(attempts)).filter { connection.submit(testRequest(tag: $0, path: "/never"), tag: $0) }.count
            connection.flush()
            return (accepted, connection.activeStreams, connection.availableStreams)
        }
        #expect(accepted == HTTP2ClientConnection.maxStreamsPerConnection)
        #expect(active == HTTP2ClientConnection.maxStreamsPerConnection)
        #expect(available == 0)
        #expect(await eventually { server.handler.received == HTTP2ClientConnection.maxStreamsPerConnection })
        #expect(server.handler.stats.withLock { $0.maxInFlight } == HTTP2ClientConnection.maxStreamsPerConnection)
    }

    @Test(.timeLimit(.minutes(1)))
    func largeBodiesAreEchoedAndOversizedOnesReset() async throws {
        let pair = try ClientServerPair()
        defer { pair.tearDown() }
        let client = pair.client
        #expect(try await client.connect())
        let large = (0..<(600 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        for tag in UInt64(1)...4 {
            #expect(await client.submit(HTTP2Request(path: "/echo/\(tag)", headers: [], body: large), tag: tag))
        }
        let oversized = [UInt8](repeating: 1, count: 1_536 * 1024)
        #expect(await client.submit(HTTP2Request(path: "/echo/5", headers: [], body: oversized), tag: 5))
        #expect(await eventually { client.delegate.finishCount == 5 })
        for tag in UInt64(1)...4 {
            guard case .success(let response)? = client.delegate.result(tag) else {
                Issue.record("large stream \(tag) failed: \(String(describing: client.delegate.result(tag)))")
                continue
            }
            #expect(response.body == large)
        }
        #expect(client.delegate.failure(5) == .reset(code: 0xb))  // ENHANCE_YOUR_CALM
        try await client.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func responseHeadersAndBodiesAreKeptOnlyUpToTheirCaps() async throws {
        let pair = try ClientServerPair(maxResponseBodyBytes: 4096)
        defer { pair.tearDown() }
        let client = pair.client
        #expect(try await client.connect())
        #expect(await client.submit(testRequest(tag: 1, path: "/bulky"), tag: 1))
        #expect(await eventually { client.delegate.result(1) != nil })
        guard case .success(let response)? = client.delegate.result(1) else {
            Issue.record("bulky answer failed: \(String(describing: client.delegate.result(1)))")
            return
        }
        // The answer completes; what is kept is bounded, the rest was read and dropped.
        #expect(response.status == 500)
        #expect(response.body.count == 4096)
        #expect(response.headers.count <= HTTP2ClientConnection.maxResponseHeaderFields)
        #expect(response.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
                <= HTTP2ClientConnection.maxResponseHeaderBytes)
        // The connection carries on.
        #expect(await client.submit(testRequest(tag: 2), tag: 2))
        #expect(await eventually { client.delegate.result(2) != nil })
        guard case .success(let next)? = client.delegate.result(2) else {
            Issue.record("next stream failed")
            return
        }
        #expect(next.status == 200)
        try await client.stop()
    }
}
