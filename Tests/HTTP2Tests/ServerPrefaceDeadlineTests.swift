#if canImport(Glibc)
import Glibc
#endif
@testable import HTTP2
import APNsSimulator
import Testing

/// The server closes a connection whose client has not finished the TLS handshake and sent the
/// HTTP/2 preface in time, so clients that connect and stay silent cannot hold its sockets; a
/// client that greeted in time keeps its connection however long it stays.
@Suite(.timeLimit(.minutes(1)))
struct ServerPrefaceDeadlineTests {
    /// A plain TCP connection to `port` that sends nothing.
    private struct SilentConnection {
        let descriptor: Int32

        init(port: Int) throws {
            descriptor = try SocketAddress.resolve(host: "127.0.0.1", port: port)[0].startConnect()
        }

        /// Whether the server closed it: readable, and the read finds the end of the stream
        /// (or a reset).
        var closedByTheServer: Bool {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 0) > 0 else { return false }
            var byte: UInt8 = 0
            let read = recv(descriptor, &byte, 1, Int32(MSG_PEEK))
            return read == 0 || (read < 0 && errno == ECONNRESET)
        }

        func close() { Glibc.close(descriptor) }
    }

    @Test func aSilentConnectionIsClosedAtTheDeadlineAndAGreetedOneStays() async throws {
        // A second: long enough for the greeted client's handshake under a sanitizer.
        let pair = try ClientServerPair(prefaceTimeout: .seconds(1))
        defer { pair.tearDown() }
        #expect(try await pair.client.connect())

        let silent = try SilentConnection(port: pair.server.port)
        defer { silent.close() }
        // Accepted after the client, so its deadline passes after the client's would have. The
        // end of the stream can only come from the server accepting and then closing it (two
        // open connections in between is a state of only a second: a slow poll can miss it).
        #expect(await eventually { silent.closedByTheServer })
        #expect(await eventually { pair.server.server.openConnectionCount == 1 })

        #expect(pair.client.delegate.closeReason == nil)
        #expect(await pair.client.submit(testRequest(tag: 1), tag: 1))
        #expect(await eventually { pair.client.delegate.finishCount == 1 })
        guard case .success(let response)? = pair.client.delegate.result(1) else {
            Issue.record("the greeted client's request: \(String(describing: pair.client.delegate.result(1)))")
            return
        }
        #expect(response.status == 200)
    }
}
