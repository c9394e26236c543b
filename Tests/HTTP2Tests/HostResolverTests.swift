@testable import HTTP2
import Observability
import Testing

/// A name lookup for one host and port that hangs until released (as `getaddrinfo` does with an
/// unresponsive name server), then answers 127.0.0.1. Counts the lookups it saw and how many ran
/// at once.
final class HangingLookup: Sendable {
    struct Counts {
        var started = 0
        var running = 0
        var mostRunning = 0
        var released = false
    }

    let host: String
    let port: Int
    let counts = Locked(Counts())

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Installs itself on the shared resolver for its host and port only (other hosts and ports
    /// are looked up for real); returns the lookup to put back.
    func install() -> HostResolver.Lookup {
        HostResolver.shared.replaceLookup { [self] host, port in
            guard host == self.host, port == self.port else { return try SocketAddress.resolve(host: host, port: port) }
            return try lookup()
        }
    }

    private func lookup() throws -> [SocketAddress] {
        counts.withLock {
            $0.started += 1
            $0.running += 1
            $0.mostRunning = max($0.mostRunning, $0.running)
        }
        defer { counts.withLock { $0.running -= 1 } }
        _ = waitFor(timeout: .seconds(60)) { counts.withLock { $0.released } }
        return try SocketAddress.resolve(host: "127.0.0.1", port: port)
    }

    func release() { counts.withLock { $0.released = true } }
    var started: Int { counts.withLock { $0.started } }
    var mostRunning: Int { counts.withLock { $0.mostRunning } }
}

/// Connection attempts and the process-wide name resolver, over real sockets.
@Suite(.serialized) struct HostResolverTests {
    /// Runs `body` with a TLS test server for "localhost", a client context that trusts it and a
    /// loop; stops them after it.
    private func withServer(_ body: (TestServer, TLSClientContext, EventLoop) async throws -> Void) async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext())
        defer { server.stop() }
        let tls = try TLSClientContext(credentials.clientConfiguration)
        let loop = try EventLoop(name: "resolver-test")
        defer { loop.shutdown() }
        try await body(server, tls, loop)
    }

    /// Connection attempts to a host whose lookup hangs, including attempts that end (as at the
    /// connect deadline) and new ones started meanwhile (as the pool's reconnects), share one
    /// lookup: the blocked threads do not grow with the attempts. Once the lookup answers, every
    /// attempt still waiting connects; the ended ones hear nothing more.
    @Test(.timeLimit(.minutes(1)))
    func attemptsToAHostShareOneHangingLookupAndConnectWhenItAnswers() async throws {
        try await withServer { server, tls, loop in try await attemptsShareOneHangingLookup(server, tls, loop) }
    }

    private func attemptsShareOneHangingLookup(_ server: TestServer, _ tls: TLSClientContext, _ loop: EventLoop) async throws {
        let hanging = HangingLookup(host: "localhost", port: server.port)
        let previous = hanging.install()
        defer { _ = HostResolver.shared.replaceLookup(previous) }

        func startAttempts(_ count: Int) async -> [(HTTP2ClientConnection, RecordingDelegate)] {
            let attempts = (0..<count).map { _ in
                let delegate = RecordingDelegate()
                return (HTTP2ClientConnection(host: "localhost", port: server.port, tls: tls, loop: loop,
                                              delegate: delegate, streamTimeoutNanoseconds: 10_000_000_000), delegate)
            }
            for (connection, _) in attempts { connection.start() }
            await onLoop(loop) {}  // every start ran on the loop (FIFO)
            return attempts
        }

        let first = await startAttempts(20)
        #expect(await eventually { hanging.started == 1 })
        #expect(hanging.started == 1)

        let ended = Array(first.prefix(10)), waiting = Array(first.dropFirst(10))
        await onLoop(loop) { for (connection, _) in ended { connection.close() } }
        #expect(ended.allSatisfy { $0.1.closeReason != nil })
        let reconnects = await startAttempts(10)
        #expect(hanging.started == 1, "one lookup for every attempt")
        #expect(hanging.mostRunning == 1)
        #expect((waiting + reconnects).allSatisfy { !$0.1.isReady && $0.1.closeReason == nil })

        hanging.release()
        #expect(await eventually { (waiting + reconnects).allSatisfy { $0.1.isReady } })
        #expect(ended.allSatisfy { !$0.1.isReady && $0.1.closeReason == "connection closed by client" })

        // The lookup is over: the next attempt looks the host up again.
        let later = await startAttempts(1)
        #expect(await eventually { later[0].1.isReady })
        #expect(hanging.started == 2)
        #expect(hanging.mostRunning == 1)

        await onLoop(loop) { for (connection, _) in waiting + reconnects + later { connection.close() } }
        #expect(await eventually { (waiting + reconnects + later).allSatisfy { $0.1.closeReason != nil } })
    }

    /// A host whose first addresses are silent (they take the TCP connection into their backlog
    /// and never answer the TLS handshake, as dead or black-holed addresses do): the attempt
    /// gives each address its share of the connect deadline and connects through the working one,
    /// instead of failing at the deadline on the first and trying it again on every reconnect.
    /// With no working address, the attempt still ends at the deadline.
    @Test(.timeLimit(.minutes(1)))
    func silentAddressesGiveWayToTheNextWithinTheConnectDeadline() async throws {
        try await withServer { server, tls, loop in try await silentAddressesGiveWay(server, tls, loop) }
    }

    private func silentAddressesGiveWay(_ server: TestServer, _ tls: TLSClientContext, _ loop: EventLoop) async throws {
        let silent = try UnansweredListener()
        defer { silent.close() }
        let silentPort = silent.port

        // "localhost" at the server's port: two silent addresses, then the server; at the silent
        // port: the two silent addresses only.
        let serverPort = server.port
        let previous = HostResolver.shared.replaceLookup { host, port in
            guard host == "localhost", port == serverPort || port == silentPort else {
                return try SocketAddress.resolve(host: host, port: port)
            }
            let silentTwice = try SocketAddress.resolve(host: "127.0.0.1", port: silentPort)
                + SocketAddress.resolve(host: "127.0.0.1", port: silentPort)
            return port == silentPort ? silentTwice : try silentTwice + SocketAddress.resolve(host: "127.0.0.1", port: serverPort)
        }
        defer { _ = HostResolver.shared.replaceLookup(previous) }

        let reaching = RecordingDelegate(), stranded = RecordingDelegate()
        let connections = [
            HTTP2ClientConnection(host: "localhost", port: serverPort, tls: tls, loop: loop, delegate: reaching,
                                  streamTimeoutNanoseconds: 10_000_000_000),
            HTTP2ClientConnection(host: "localhost", port: silentPort, tls: tls, loop: loop, delegate: stranded,
                                  streamTimeoutNanoseconds: 10_000_000_000),
        ]
        let started = ContinuousClock.now
        for connection in connections { connection.start() }
        // Ready, where the connect deadline (10 s) would have ended the attempt had it waited on
        // the first address.
        #expect(await eventually(timeout: .seconds(15)) { reaching.isReady || reaching.closeReason != nil })
        #expect(reaching.isReady)
        #expect(reaching.closeReason == nil, "\(String(describing: reaching.closeReason))")
        #expect(ContinuousClock.now - started >= .seconds(5), "both silent addresses were tried first")
        // Silent everywhere: still ended at the deadline (the deadline is checked after a switch).
        #expect(await eventually(timeout: .seconds(15)) { stranded.closeReason != nil })
        #expect(stranded.closeReason?.contains("connect timed out") == true, "\(String(describing: stranded.closeReason))")
        #expect(!stranded.isReady)
        await onLoop(loop) { connections[0].close() }
        #expect(await eventually { reaching.closeReason != nil })
    }
}
