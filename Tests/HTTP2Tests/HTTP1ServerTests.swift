#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import HTTP2
import Synchronization
import Testing

/// The status server over real sockets on 127.0.0.1: normal use, and the clients that try to
/// break it (garbage, oversized heads, bodies, slow writers, slow readers, too many connections).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct HTTP1ServerTests {
    final class Fixture {
        let loop: EventLoop
        let server: HTTP1Server

        init(limits: HTTP1ServerLimits = HTTP1ServerLimits(), body: [UInt8] = Array("hello\n".utf8),
             loopStackBytes: Int? = nil) throws {
            loop = try EventLoop(name: "http-test", preciseTimeouts: true, stackBytes: loopStackBytes)
            server = try HTTP1Server(host: "127.0.0.1", port: 0, loop: loop, limits: limits) { request in
                switch request.path {
                case "/hello": return HTTP1Response(status: 200, body: body)
                case "/echo": return .text(200, "\(request.method) \(request.path) \(request.query ?? "-")")
                default: return .text(404, "not found")
                }
            }
        }

        func client() throws -> HTTPTestClient { try HTTPTestClient(port: server.port) }

        func close() {
            server.close()
            loop.shutdown()
        }
    }

    /// Every server answers a fresh connection after whatever the test did to it. Asked for
    /// `/echo`, a short answer: `/hello` may be 32 MiB, which a client slowed down by a sanitizer
    /// may not read within a short write timeout.
    func expectStillServing(_ fixture: Fixture) throws {
        let client = try fixture.client()
        client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(client.readResponse()?.status == 200)
    }

    @Test func keptAliveAndPipelinedRequestsAreAnsweredInOrder() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let client = try fixture.client()
        client.send("GET /echo?a=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        let first = try #require(client.readResponse())
        #expect(first.status == 200)
        #expect(first.body == "GET /echo a=1\n")
        #expect(first.headers["connection"] == nil)
        #expect(first.headers["content-type"] == "text/plain; charset=utf-8")

        client.send("GET /echo?b HTTP/1.1\r\nHost: x\r\n\r\nHEAD /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\nHost: x\n\n")
        #expect(client.readResponse()?.body == "GET /echo b\n")
        let head = try #require(client.readResponse(head: true))
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "6")
        #expect(client.readResponse()?.status == 404)

        client.send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let last = try #require(client.readResponse())
        #expect(last.body == "hello\n")
        #expect(last.headers["connection"] == "close")
        #expect(client.waitForClose())
    }

    /// Thousands of small requests pipelined in one burst are all answered, in order, by a loop
    /// thread with a 512 KiB stack: each read's requests (up to about 1,700 of these) are
    /// answered in a loop. When each answer written at once answered the next request from
    /// inside itself, one nested call per request, such a burst overflowed that stack.
    @Test func aBurstOfPipelinedRequestsIsAnsweredInOrder() throws {
        let fixture = try Fixture(loopStackBytes: 512 * 1024)
        defer { fixture.close() }
        let client = try fixture.client()
        let count = 3_000
        client.send((0..<count).map { "GET /echo?\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
        var bodies: [String] = []
        for _ in 0..<count {
            guard let answer = client.readResponse() else { break }
            bodies.append(answer.body)
        }
        #expect(bodies == (0..<count).map { "GET /echo \($0)\n" })
        try expectStillServing(fixture)
    }

    /// A probe that sends its request and shuts its sending side (`nc -N`, `curl` through some
    /// proxies) still gets its answer. The request and the end of stream usually come in one
    /// read (then the answer says `Connection: close`); on a slow machine they may come in two.
    @Test func aRequestFollowedByHalfCloseIsAnsweredThenClosed() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let client = try fixture.client()
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        shutdown(client.fd, Int32(SHUT_WR))
        let response = try #require(client.readResponse())
        #expect(response.status == 200)
        #expect(response.body == "hello\n")
        #expect(client.waitForClose())
        // Pipelined requests followed by the end of stream are all answered (the last one with
        // `Connection: close` when the end came in the same read), then the connection closes.
        let pipelined = try fixture.client()
        pipelined.send("GET /echo?1 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?2 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?3 HTTP/1.1\r\nHost: x\r\n\r\n")
        shutdown(pipelined.fd, Int32(SHUT_WR))
        let answers = (1...3).compactMap { _ in pipelined.readResponse() }
        #expect(answers.map(\.body) == ["GET /echo 1\n", "GET /echo 2\n", "GET /echo 3\n"])
        #expect(pipelined.waitForClose())
        // A half-close with only part of a head is closed at once, not answered or kept.
        let partial = try fixture.client()
        partial.send("GET /hel")
        shutdown(partial.fd, Int32(SHUT_WR))
        #expect(partial.waitForClose())
        try expectStillServing(fixture)
    }

    /// Out of descriptors, a connection cannot be accepted and waits in the backlog, while the
    /// listening socket stays readable: the server retries a few times a second instead of
    /// spinning its loop on it, and takes the connection once descriptors are free. (The
    /// exhaustion is injected into `accept`: lowering the process's real limit would starve the
    /// other tests' threads.)
    @Test func outOfDescriptorsTheServerRetriesCalmlyAndServesAfterwards() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        fixture.server.descriptorsExhausted.store(true, ordering: .relaxed)
        let client = try fixture.client()  // connected by the kernel, waiting in the backlog
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(waitFor(timeout: .seconds(10)) { fixture.server.acceptFailureCount > 0 })
        let firstFailure = Date()
        let failuresAtTheStart = fixture.server.acceptFailureCount  // more than one if this thread was slow to look
        // It keeps retrying, at most once per 100 ms pause: a spinning loop would fail thousands
        // of times in the time a slow machine takes to see the third failure.
        #expect(waitFor(timeout: .seconds(10)) { fixture.server.acceptFailureCount >= failuresAtTheStart + 2 })
        let failures = fixture.server.acceptFailureCount - failuresAtTheStart
        let elapsed = Date().timeIntervalSince(firstFailure)
        fixture.server.descriptorsExhausted.store(false, ordering: .relaxed)
        #expect(failures <= Int(elapsed / 0.1) + 2, "\(failures) failed accepts in \(elapsed) s")
        #expect(client.readResponse()?.status == 200)
    }

    @Test func http10ClosesUnlessKeptAlive() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let client = try fixture.client()
        client.send("GET /hello HTTP/1.0\r\n\r\n")
        #expect(client.readResponse()?.status == 200)
        #expect(client.waitForClose())
    }

    @Test(arguments: [
        "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\u{03}\u{03}\r\n\r\n",  // a TLS ClientHello's start
        "hello\r\n\r\n",
        "GET /hello\r\n\r\n",
        "GET hello HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /hello HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
        "GET /hello HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET /hello HTTP/1.1\r\n\r\n",  // no Host
        "GET /hello HTTP/2.0\r\nHost: x\r\n\r\n",
        "GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        "GET /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ])
    func garbageIsRefusedAndTheConnectionClosed(request: String) throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let client = try fixture.client()
        client.send(request)
        let response = try #require(client.readResponse())
        #expect([400, 413, 505].contains(response.status), "\(response.status)")
        #expect(response.headers["connection"] == "close")
        #expect(client.waitForClose())
        try expectStillServing(fixture)
    }

    @Test func randomBytesNeverCrashTheServer() throws {
        let fixture = try Fixture(limits: HTTP1ServerLimits(headTimeout: .milliseconds(300)))
        defer { fixture.close() }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let client = try fixture.client()
            let junk = (0..<Int.random(in: 1...3000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            client.send(junk + Array("\r\n\r\n".utf8))
            #expect(client.readResponse()?.status == 400)
            #expect(client.waitForClose())
        }
        try expectStillServing(fixture)
        #expect(waitFor { fixture.server.connectionCount == 0 })
    }

    @Test func otherMethodsGet405AndKeepTheConnection() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let client = try fixture.client()
        client.send("DELETE /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try #require(client.readResponse())
        #expect(response.status == 405)
        #expect(response.headers["allow"] == "GET, HEAD")
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(client.readResponse()?.status == 200)
    }

    @Test func anOversizedHeadGets431() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let client = try fixture.client()
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 200_000) + "\r\n\r\n")
        #expect(client.readResponse()?.status == 431)
        #expect(client.waitForClose())
        try expectStillServing(fixture)
    }

    @Test func aClientThatNeverFinishesItsHeadIsClosedAfterTheDeadline() throws {
        let fixture = try Fixture(limits: HTTP1ServerLimits(headTimeout: .milliseconds(300)))
        defer { fixture.close() }
        let silent = try fixture.client()
        let slow = try fixture.client()
        slow.send("GET /hello HTTP/1.1\r\nHo")
        // Meanwhile others are served: nothing waits for the slow ones.
        try expectStillServing(fixture)
        #expect(slow.readResponse()?.status == 408)
        #expect(slow.waitForClose())
        #expect(silent.readResponse()?.status == 408)
        #expect(waitFor { fixture.server.connectionCount == 0 })
    }

    @Test func anIdleKeptAliveConnectionIsClosedAfterTheIdleTimeout() throws {
        let fixture = try Fixture(limits: HTTP1ServerLimits(idleTimeout: .milliseconds(300)))
        defer { fixture.close() }
        let client = try fixture.client()
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(client.readResponse()?.status == 200)
        #expect(client.waitForClose())
        #expect(waitFor { fixture.server.connectionCount == 0 })
    }

    @Test func aClientThatDoesNotReadItsAnswerIsClosedAfterTheWriteTimeout() throws {
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 32 << 20)
        let fixture = try Fixture(limits: HTTP1ServerLimits(writeTimeout: .milliseconds(500)), body: big)
        defer { fixture.close() }
        let client = try fixture.client()
        client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(waitFor { fixture.server.connectionCount == 1 })
        // The client reads nothing: 32 MiB cannot fit in the socket buffers.
        #expect(waitFor { fixture.server.connectionCount == 0 })
        try expectStillServing(fixture)
    }

    @Test func connectionsBeyondTheCapGet503WhileEveryOneIsBusyWithARequest() throws {
        // Each connection is busy answering: 32 MiB its client does not read (no socket holds it).
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 32 << 20)
        let fixture = try Fixture(limits: HTTP1ServerLimits(maxConnections: 4, writeTimeout: .seconds(60)), body: big)
        defer { fixture.close() }
        var busy = try (0..<4).map { _ in try fixture.client() }
        for client in busy {
            client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(client.readStatusLine() == "HTTP/1.1 200 OK")   // answering, and stuck there
        }
        #expect(fixture.server.connectionCount == 4)
        let extra = try fixture.client()
        let refused = try #require(extra.readResponse())
        #expect(refused.status == 503)
        #expect(refused.body == "too many connections\n")
        #expect(fixture.server.rejectedConnectionCount >= 1)
        // Their clients go away, and the server takes new clients again.
        busy.removeAll()
        #expect(waitFor { fixture.server.connectionCount == 0 })
        try expectStillServing(fixture)
    }

    /// Idle keep-alive connections (or silent ones) at the cap cannot lock a health check out:
    /// the one that has waited longest is closed to make room.
    @Test func atTheCapTheLongestWaitingConnectionMakesRoom() throws {
        let fixture = try Fixture(limits: HTTP1ServerLimits(maxConnections: 4, idleTimeout: .seconds(120)))
        defer { fixture.close() }
        var idle: [HTTPTestClient] = []
        for _ in 0..<4 {
            let client = try fixture.client()
            client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(client.readResponse()?.status == 200)   // answered, kept alive, now idle
            idle.append(client)
        }
        #expect(fixture.server.connectionCount == 4)
        let health = try fixture.client()
        health.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(health.readResponse()?.status == 200)
        #expect(fixture.server.rejectedConnectionCount == 0)
        #expect(idle[0].waitForClose(), "the longest idle connection was not the one closed")
        // The others are still served on their connections.
        idle[3].send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(idle[3].readResponse()?.status == 200)
        #expect(fixture.server.connectionCount == 4)
    }

    /// Clients that hold every slot with a head they never finish (a slowloris, within the head
    /// deadline) cannot lock a health check out: at the cap the one waiting longest makes room.
    @Test func atTheCapTrickledHeadsMakeRoomToo() throws {
        let fixture = try Fixture(limits: HTTP1ServerLimits(maxConnections: 4, headTimeout: .seconds(120)))
        defer { fixture.close() }
        var trickling: [HTTPTestClient] = []
        for _ in 0..<4 {
            let client = try fixture.client()
            client.send("GET /hello HTTP/1.1\r\nHost: x\r\n")   // never finished
            trickling.append(client)
        }
        #expect(waitFor { fixture.server.connectionCount == 4 })
        var checks: [HTTPTestClient] = []   // kept open (idle, keep-alive): each takes a slot
        for round in 0..<3 {
            let health = try fixture.client()
            checks.append(health)
            health.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(health.readResponse()?.status == 200, "round \(round)")
            #expect(trickling[round].waitForClose(), "the longest-waiting trickle was not the one closed")
        }
        #expect(fixture.server.rejectedConnectionCount == 0)
    }

    /// Clients that never close hold slots the server cannot end at once: one answered with
    /// `Connection: close` lingers (2 s) to let the answer be read, one that pipelined part of
    /// a second head behind an answered request waits for the rest (up to the head deadline).
    /// At the cap either makes room for a health check, the one waiting longest first.
    @Test(arguments: ["GET /hello HTTP/1.0\r\n\r\n", "GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hel"])
    func atTheCapLingeringAndPipelinedConnectionsMakeRoom(sent: String) throws {
        let fixture = try Fixture(limits: HTTP1ServerLimits(maxConnections: 4, headTimeout: .seconds(120)))
        defer { fixture.close() }
        var holding: [HTTPTestClient] = []
        for _ in 0..<4 {
            let client = try fixture.client()
            client.send(sent)
            #expect(client.readResponse()?.status == 200)   // answered; the connection stays open
            holding.append(client)
        }
        #expect(fixture.server.connectionCount == 4)
        let health = try fixture.client()
        health.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(health.readResponse()?.status == 200)
        #expect(fixture.server.rejectedConnectionCount == 0)
        #expect(holding[0].waitForClose(), "the longest-waiting connection was not the one closed")
    }

    @Test func closingTheServerClosesItsConnections() throws {
        let fixture = try Fixture()
        let client = try fixture.client()
        #expect(waitFor { fixture.server.connectionCount == 1 })
        fixture.close()
        #expect(client.waitForClose())
        #expect(throws: (any Error).self) { try fixture.client() }
    }
}

@Suite struct HTTP1RequestParserTests {
    @Test func aCompleteHeadIsParsed() throws {
        let text = "GET /metrics?x=1 HTTP/1.1\r\nHost: localhost:9464\r\nAccept:  text/plain \r\n\r\nGET"
        let outcome = HTTP1RequestParser.parse(Array(text.utf8)[...], maxHeadBytes: 8192)
        guard case .request(let request, let consumed) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(consumed == text.utf8.count - 3)
        #expect(request.method == "GET")
        #expect(request.path == "/metrics")
        #expect(request.query == "x=1")
        #expect(request.header("accept") == "text/plain")
        #expect(request.keepsAlive)
    }

    @Test func partialHeadsWaitAndOversizedOnesAreRefused() {
        #expect(HTTP1RequestParser.parse(Array("GET / HTTP/1.1\r\nHost: x\r\n".utf8)[...], maxHeadBytes: 100) == .incomplete)
        let long = Array(("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 200)).utf8)
        guard case .refused(431, _) = HTTP1RequestParser.parse(long[...], maxHeadBytes: 100) else {
            Issue.record("not refused")
            return
        }
    }

    @Test func connectionHeaderDecidesKeepAlive() throws {
        func request(_ text: String) throws -> HTTP1Request {
            guard case .request(let request, _) = HTTP1RequestParser.parse(Array(text.utf8)[...], maxHeadBytes: 8192) else {
                throw POSIXError(.EINVAL)
            }
            return request
        }
        #expect(try !request("GET / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n").keepsAlive)
        #expect(try request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keepsAlive)
        #expect(try !request("GET / HTTP/1.0\r\n\r\n").keepsAlive)
    }
}
