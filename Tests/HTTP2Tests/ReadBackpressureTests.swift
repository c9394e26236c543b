#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
@testable import HTTP2
import Testing

/// Read backpressure on a real socket: a client whose output passes
/// ``TLSConnection/outputHighWater`` for a peer that does not read stops reading, and reads
/// again once its output drains, however the output drained.
@Suite struct ReadBackpressureTests {
    /// The request body of every large stream: within the 64 KiB stream window the server starts
    /// each stream with, so no stream waits for a WINDOW_UPDATE from a server that hears nothing.
    static let bodySize = 60_000
    /// The most large streams the test sends to pass the high-water mark (well within the
    /// server's 16 MiB connection window).
    static let maxLargeStreams: UInt64 = 250

    /// The state that once hung the connection for good: reading paused for backpressure, then a
    /// flush (here one for a newly submitted request) wrote everything out, which left the socket
    /// watched for neither reading nor writing. Every stream must still be answered.
    @Test(.timeLimit(.minutes(1)))
    func readingPausedForBackpressureResumesAfterAFlushWritesEverythingOut() async throws {
        let fixture = try ProxiedClient()
        defer { fixture.tearDown() }
        let proxy = fixture.proxy, client = fixture.client, connection = client.connection

        #expect(try await client.connect())
        #expect(await client.submit(largeRequest(tag: 0), tag: 0))
        #expect(await eventually { client.delegate.result(0) != nil })
        guard let tls = await onLoop(client.loop, { connection.connection }) else {
            Issue.record("the client has no TLS connection")
            return
        }

        // An answer the proxy holds back: once passed on, it makes the client's socket readable.
        await proxy.holdDataForClient()
        #expect(await client.submit(testRequest(tag: 1), tag: 1))
        #expect(await eventuallyAsync { await proxy.bytesWaitingForClient() > 0 })

        // The peer stops reading: large requests fill the socket buffers, then the output buffer.
        await proxy.stopReadingFromClient()
        var nextTag: UInt64 = 2
        var pendingOutput = 0
        while pendingOutput < TLSConnection.outputHighWater && nextTag < 2 + Self.maxLargeStreams {
            let tag = nextTag
            pendingOutput = await onLoop(client.loop) {
                guard connection.submit(largeRequest(tag: tag), tag: tag) else { return -1 }
                connection.flush()
                return tls.pendingOutputCount
            }
            guard pendingOutput >= 0 else {
                Issue.record("stream \(tag) was not accepted")
                return
            }
            nextTag += 1
        }
        try #require(pendingOutput >= TLSConnection.outputHighWater,
                     "\(nextTag - 2) large streams left \(pendingOutput) bytes of output")

        // Something to read arrives while the output is above the mark: reading pauses.
        await proxy.releaseDataForClient()
        #expect(await eventuallyAsync { await onLoop(client.loop) { tls.readPauses } == 1 })

        // The peer reads again. Holding the client's loop until the peer has taken every byte
        // the client wrote, so the socket is empty before the loop sees it writable, the next
        // flush (a new request's) writes the pending output while reading is still paused; as
        // often as it takes (a busy machine may give the peer too little time, or the kernel
        // too small a buffer, for one flush to write it all), until none is left.
        let lastTag = nextTag
        let afterFlush = await onLoop(client.loop) { () -> (drained: Bool, pendingOutput: Int) in
            proxy.resumeReadingFromClient()
            _ = connection.submit(largeRequest(tag: lastTag), tag: lastTag)
            var drained = true
            for _ in 0..<100 {
                let written = BIO_number_written(SSL_get_wbio(tls.sslHandle))
                drained = holdingTheLoop { UInt64(proxy.bytesReadFromClient) == written }
                connection.flush()
                if !drained || tls.pendingOutputCount == 0 { break }
            }
            return (drained, tls.pendingOutputCount)
        }
        #expect(afterFlush.drained)
        // All output is out and reading is still paused: only the loop seeing the socket
        // writable can resume reading now.
        #expect(afterFlush.pendingOutput == 0)

        // Reading resumes: every stream is answered with its own body.
        let total = Int(lastTag) + 1
        let allAnswered = await eventually { client.delegate.finishCount == total }
        #expect(allAnswered, "\(client.delegate.finishCount) of \(total) streams answered")
        for tag in UInt64(0)...lastTag where allAnswered {
            guard case .success(let response)? = client.delegate.result(tag) else {
                Issue.record("stream \(tag): \(String(describing: client.delegate.result(tag)))")
                break
            }
            #expect(response.status == 200)
            #expect(response.body == (tag == 1 ? testRequest(tag: 1) : largeRequest(tag: tag)).body)
        }
        try await client.stop()
    }
}

extension ReadBackpressureTests {
    /// The output buffer's bound: with the peer not reading, requests submitted past the mark
    /// stay inside the session, and the buffer grows past ``TLSConnection/outputHighWater`` by
    /// one frame at most, however many are submitted.
    @Test(.timeLimit(.minutes(1)))
    func theOutputStopsAtItsMarkWhileThePeerDoesNotRead() async throws {
        let fixture = try ProxiedClient()
        defer { fixture.tearDown() }
        let proxy = fixture.proxy, client = fixture.client, connection = client.connection
        #expect(try await client.connect())
        guard let tls = await onLoop(client.loop, { connection.connection }) else {
            Issue.record("the client has no TLS connection")
            return
        }

        await proxy.stopReadingFromClient()
        var largestOutput = 0
        for tag in UInt64(0)..<Self.maxLargeStreams {
            let pending = await onLoop(client.loop) { () -> Int in
                guard connection.submit(largeRequest(tag: tag), tag: tag) else { return -1 }
                connection.flush()
                return tls.pendingOutputCount
            }
            try #require(pending >= 0, "stream \(tag) was not accepted")
            largestOutput = max(largestOutput, pending)
        }
        // 250 streams of 60,000 bytes: 15 MB the peer does not take.
        try #require(largestOutput >= TLSConnection.outputHighWater, "the output never reached its mark")
        #expect(largestOutput <= TLSConnection.outputHighWater + 16_384 + 9, "\(largestOutput) bytes of output")

        // The peer reads again: every stream is answered.
        proxy.resumeReadingFromClient()
        #expect(await eventually(timeout: .seconds(40)) { client.delegate.finishCount == Int(Self.maxLargeStreams) })
        try await client.stop()
    }
}

/// An echo server behind a proxy that can stop reading from the client, and a client of it.
/// Streams outlive the tests' waits: a stuck connection shows as streams never answered.
private struct ProxiedClient {
    let credentials: TestCredentials
    let server: TestServer
    let proxy: PausableTCPProxy
    let client: TestClient

    init() throws {
        credentials = try TestCredentials()
        server = try TestServer(tls: try credentials.serverContext(), maxConcurrentStreams: 1000)
        proxy = try PausableTCPProxy(serverPort: server.port)
        client = try TestClient(port: proxy.port, tls: try TLSClientContext(credentials.clientConfiguration),
                                streamTimeoutNanoseconds: 120_000_000_000)
    }

    func tearDown() {
        client.loop.shutdown()
        proxy.stop()
        server.stop()
        credentials.remove()
    }
}

/// A POST to `/echo/<tag>` with a body of ``ReadBackpressureTests/bodySize`` bytes particular to `tag`.
private func largeRequest(tag: UInt64) -> HTTP2Request {
    let body = (0..<ReadBackpressureTests.bodySize).map { UInt8(truncatingIfNeeded: $0 &+ Int(tag) &* 31) }
    return HTTP2Request(path: "/echo/\(tag)", headers: [], body: body)
}

/// Waits on the calling event loop's own thread, checking `condition` every millisecond for up
/// to 10 s, so the loop sees nothing of what happens meanwhile. Returns whether it came true.
private func holdingTheLoop(until condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        usleep(1000)
    }
    return true
}
