#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import HTTP2
import APNsSimulator
import Synchronization
import Testing
@_exported import TestSupport
import Observability

/// Generated credentials in a fresh temporary directory: CA, server (localhost + 127.0.0.1)
/// and client certificates.
struct TestCredentials {
    let authority: CertificateAuthority
    let files: CertificateFiles
    let directory: String

    init(serverHosts: [String] = ["localhost", "127.0.0.1"]) throws {
        directory = NSTemporaryDirectory() + "http2-tests-" + UUID().uuidString
        authority = try CertificateAuthority(commonName: "HTTP2Tests CA")
        files = try authority.writeFiles(to: directory, serverHosts: serverHosts, clientCommonName: "test-client")
    }

    var clientConfiguration: TLSClientConfiguration { TLSClientConfiguration(caFile: files.caCertificatePath) }

    func serverContext(requireClientCertificates: Bool = false) throws -> TLSServerContext {
        try TLSServerContext(certificateFile: files.serverCertificatePath, privateKeyFile: files.serverPrivateKeyPath,
                             clientCAFile: requireClientCertificates ? files.caCertificatePath : nil)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Records everything a client connection reports; optional hooks run on the loop thread.
final class RecordingDelegate: HTTP2ClientConnectionDelegate, @unchecked Sendable {
    struct Record {
        var readyCount = 0
        var settings: [Int] = []
        var results: [UInt64: Result<HTTP2Response, HTTP2StreamFailure>] = [:]
        var finishCount = 0
        var closeReason: String?
        var finishedAfterClose = false
    }

    let record = Locked(Record())
    var onReady: ((HTTP2ClientConnection) -> Void)?
    var onFinish: ((HTTP2ClientConnection) -> Void)?
    /// Records a copy of each response's header list instead of the list itself, as a delegate
    /// that reads the headers and keeps none of them leaves it: the connection's again.
    var copiesHeaders = false

    func connectionDidBecomeReady(_ connection: HTTP2ClientConnection) {
        record.withLock { $0.readyCount += 1 }
        onReady?(connection)
    }

    func connection(_ connection: HTTP2ClientConnection, didFinishStream tag: UInt64,
                    result: Result<HTTP2Response, HTTP2StreamFailure>) {
        record.withLock {
            if $0.closeReason != nil { $0.finishedAfterClose = true }
            precondition($0.results[tag] == nil, "stream \(tag) finished twice")
            $0.results[tag] = copiesHeaders
                ? result.map { HTTP2Response(status: $0.status, headers: $0.headers.map { $0 }, body: $0.body) }
                : result
            $0.finishCount += 1
        }
        onFinish?(connection)
    }

    func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {
        record.withLock { $0.settings.append(maxConcurrentStreams) }
    }

    func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String) {
        record.withLock { $0.closeReason = reason }
    }

    var isReady: Bool { record.withLock { $0.readyCount > 0 } }
    var closeReason: String? { record.withLock { $0.closeReason } }
    var finishCount: Int { record.withLock { $0.finishCount } }
    func failure(_ tag: UInt64) -> HTTP2StreamFailure? {
        if case .failure(let failure)? = result(tag) { return failure }
        return nil
    }
    func result(_ tag: UInt64) -> Result<HTTP2Response, HTTP2StreamFailure>? { record.withLock { $0.results[tag] } }
}

/// A test server handler: `/echo…` answers 200 with the request body and an `x-path` header,
/// `/never…` never answers, `/slow…` answers after 2 ms. Tracks concurrency on the server side.
final class TestHandler: HTTP2ServerHandler, @unchecked Sendable {
    struct Stats {
        var received = 0
        var inFlight = 0
        var maxInFlight = 0
    }

    let stats = Locked(Stats())

    func handle(_ request: HTTP2ServerRequest, responder: HTTP2Responder) {
        stats.withLock {
            $0.received += 1
            $0.inFlight += 1
            $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
        }
        if request.path.hasPrefix("/never") { return }
        if request.path.hasPrefix("/bulky") {
            // Far more than any client should keep: 100 headers of 150 bytes and a 3 MiB body.
            stats.withLock { $0.inFlight -= 1 }
            let headers = (0..<100).map { (name: "x-filler-\($0)", value: String(repeating: "v", count: 150)) }
            responder.respond(status: 500, headers: headers, body: [UInt8](repeating: 0x78, count: 3 << 20))
            return
        }
        let answer: @Sendable () -> Void = { [self] in
            stats.withLock { $0.inFlight -= 1 }
            responder.respond(status: 200, headers: [("x-path", request.path), ("content-type", "application/octet-stream")],
                              body: request.body)
        }
        if request.path.hasPrefix("/slow") {
            responder.loop.schedule(afterNanoseconds: 2_000_000, answer)
        } else {
            answer()
        }
    }

    var received: Int { stats.withLock { $0.received } }
}

/// A running HTTP2Server on 127.0.0.1 with its own loop group.
final class TestServer {
    let group: EventLoopGroup
    let server: HTTP2Server
    let handler = TestHandler()

    init(tls: TLSServerContext, maxConcurrentStreams: Int = 100,
         prefaceTimeout: Duration = HTTP2Server.defaultPrefaceTimeout) throws {
        group = try EventLoopGroup(threads: 1, name: "test-server")
        server = try HTTP2Server(host: "127.0.0.1", port: 0, tls: tls, group: group,
                                 maxConcurrentStreams: maxConcurrentStreams, prefaceTimeout: prefaceTimeout,
                                 handler: handler)
    }

    var port: Int { server.port }

    func stop() {
        server.close()
        group.shutdown()
    }
}

/// The request a test sends for `tag` on `path`.
func testRequest(tag: UInt64, path: String = "/echo") -> HTTP2Request {
    HTTP2Request(path: "\(path)/\(tag)", headers: [("x-tag", String(tag))], body: Array("body of \(tag)".utf8))
}

/// Runs `body` on `loop` and returns its result.
func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        loop.execute { continuation.resume(returning: body()) }
    }
}

/// One client connection on its own loop, with a recording delegate.
final class TestClient: @unchecked Sendable {
    let loop: EventLoop
    let delegate = RecordingDelegate()
    let connection: HTTP2ClientConnection

    init(host: String = "127.0.0.1", port: Int, tls: TLSClientContext,
         streamTimeoutNanoseconds: UInt64 = 10_000_000_000,
         maxResponseBodyBytes: Int = HTTP2ClientConnection.defaultMaxResponseBodyBytes) throws {
        loop = try EventLoop(name: "test-client")
        connection = HTTP2ClientConnection(host: host, port: port, tls: tls, loop: loop, delegate: delegate,
                                           streamTimeoutNanoseconds: streamTimeoutNanoseconds,
                                           maxResponseBodyBytes: maxResponseBodyBytes,
                                           // The echo server's `x-path` comes from the expected
                                           // names, its `content-type` from the bytes.
                                           expectedResponseHeaderNames: ["x-path"])
    }

    /// Starts connecting and waits until the connection is ready (or closed).
    @discardableResult
    func connect() async throws -> Bool {
        connection.start()
        _ = await eventually { delegate.isReady || delegate.closeReason != nil }
        return delegate.isReady
    }

    /// Submits and flushes one request on the loop.
    func submit(_ request: HTTP2Request, tag: UInt64) async -> Bool {
        let connection = self.connection
        return await onLoop(loop) {
            let accepted = connection.submit(request, tag: tag)
            connection.flush()
            return accepted
        }
    }

    /// Connects, keeps the connection full of `total` echo requests (`RequestPump`) until every
    /// one is answered, and checks that each answer is its own request's echo: status 200, the
    /// body, and `x-path`. Returns the pump, for what it saw on the loop.
    func sendEchoRequests(_ total: UInt64) async throws -> RequestPump {
        let pump = RequestPump(total: total)
        delegate.onReady = { pump.fill($0) }
        delegate.onFinish = { pump.fill($0) }
        #expect(try await connect())
        #expect(await eventually { delegate.finishCount == Int(total) })
        for tag in UInt64(0)..<total {
            guard case .success(let response)? = delegate.result(tag) else {
                Issue.record("stream \(tag) did not succeed: \(String(describing: delegate.result(tag)))")
                return pump
            }
            #expect(response.status == 200)
            #expect(response.body == Array("body of \(tag)".utf8))
            #expect(response.header("x-path") == "/echo/\(tag)")
        }
        return pump
    }

    /// Closes the connection, waits for `connectionDidClose`, and stops the loop.
    func stop() async throws {
        let connection = self.connection
        loop.execute { connection.close() }
        _ = await eventually { delegate.closeReason != nil }
        loop.shutdown()
    }
}

/// Generated credentials, a `TestServer` and one `TestClient` for it on loopback; `tearDown()`
/// stops all three.
final class ClientServerPair: @unchecked Sendable {
    let credentials: TestCredentials
    let server: TestServer
    let client: TestClient

    init(maxConcurrentStreams: Int = 100, streamTimeoutNanoseconds: UInt64 = 10_000_000_000,
         maxResponseBodyBytes: Int = HTTP2ClientConnection.defaultMaxResponseBodyBytes,
         prefaceTimeout: Duration = HTTP2Server.defaultPrefaceTimeout) throws {
        credentials = try TestCredentials()
        do {
            server = try TestServer(tls: try credentials.serverContext(), maxConcurrentStreams: maxConcurrentStreams,
                                    prefaceTimeout: prefaceTimeout)
        } catch {
            credentials.remove()
            throw error
        }
        do {
            client = try TestClient(port: server.port, tls: try TLSClientContext(credentials.clientConfiguration),
                                    streamTimeoutNanoseconds: streamTimeoutNanoseconds,
                                    maxResponseBodyBytes: maxResponseBodyBytes)
        } catch {
            server.stop()
            credentials.remove()
            throw error
        }
    }

    func tearDown() {
        client.loop.shutdown()
        server.stop()
        credentials.remove()
    }
}
