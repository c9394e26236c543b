#if canImport(Glibc)
import Glibc
#endif
@testable import HTTP2
import Synchronization

/// A TCP proxy on 127.0.0.1 between one client and a server on loopback, on an event loop of its
/// own. A test can stop it reading what the client sends (the client's output then fills the
/// socket buffers between them, as it does for a peer that does not read) and make it hold back
/// what the server sends to the client, then let both flow again. Whatever it has read waits in
/// memory, without limit, until the other side takes it. Bytes pass unchanged (TLS included).
final class PausableTCPProxy: @unchecked Sendable {
    let port: Int
    let loop: EventLoop
    private let serverPort: Int
    private let listenFD: Int32
    private let clientBytesRead = Atomic<Int>(0)
    // Loop-thread state.
    private var client: ProxyEndpoint?
    private var server: ProxyEndpoint?
    private var readsFromClient = true
    private var forwardsToClient = true
    private var buffer = [UInt8](repeating: 0, count: 65_536)

    /// Listens on 127.0.0.1 (any free port) and connects each accepted client to 127.0.0.1:`serverPort`.
    init(serverPort: Int) throws {
        self.serverPort = serverPort
        loop = try EventLoop(name: "test-proxy")
        do {
            let address = try SocketAddress.resolve(host: "127.0.0.1", port: 0, passive: true)[0]
            listenFD = try address.listen(backlog: 4)
        } catch {
            loop.shutdown()
            throw error
        }
        port = SocketAddress.localPort(of: listenFD)
        loop.execute { [self] in
            do {
                try loop.register(fd: listenFD, interest: .readable, handler: ProxyListener(proxy: self, fd: listenFD))
            } catch {
                Glibc.close(listenFD)
            }
        }
    }

    /// The bytes read from the client so far. Any thread.
    var bytesReadFromClient: Int { clientBytesRead.load(ordering: .acquiring) }

    /// Stops reading what the client sends; returns once that is in effect.
    func stopReadingFromClient() async {
        await onLoop(loop) { [self] in
            readsFromClient = false
            updateInterests()
        }
    }

    /// Reads what the client sends again (soon after the call). Any thread.
    func resumeReadingFromClient() {
        loop.execute { [self] in
            readsFromClient = true
            updateInterests()
        }
    }

    /// Keeps what the server sends from now on instead of passing it to the client.
    func holdDataForClient() async {
        await onLoop(loop) { [self] in
            forwardsToClient = false
            updateInterests()
        }
    }

    /// Passes what was held, and everything after it, to the client again.
    func releaseDataForClient() async {
        await onLoop(loop) { [self] in
            forwardsToClient = true
            if let client { write(client) }
            updateInterests()
        }
    }

    /// The bytes from the server that wait to be passed to the client.
    func bytesWaitingForClient() async -> Int {
        await onLoop(loop) { [self] in client?.waitingCount ?? 0 }
    }

    /// Closes the listening socket and both connections, and stops the loop.
    func stop() {
        loop.shutdown()
    }

    // MARK: - Loop thread

    fileprivate func accept() {
        let fd = Glibc.accept(listenFD, nil, nil)
        guard fd >= 0 else { return }
        guard client == nil else {
            Glibc.close(fd)  // one client at a time
            return
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        SocketAddress.setNoDelay(fd)
        guard let client = endpoint(watching: fd) else { return }
        self.client = client
        guard let serverFD = try? SocketAddress.resolve(host: "127.0.0.1", port: serverPort)[0].startConnect(),
              let server = endpoint(watching: serverFD) else {
            closeConnections()
            return
        }
        SocketAddress.setNoDelay(serverFD)
        self.server = server
        updateInterests()
    }

    /// An endpoint for the socket `fd`, registered with the loop (nothing watched yet); nil, and
    /// the socket closed, when the loop cannot take it.
    private func endpoint(watching fd: Int32) -> ProxyEndpoint? {
        let endpoint = ProxyEndpoint(proxy: self, fd: fd)
        do {
            try loop.register(fd: fd, interest: [], handler: endpoint)
        } catch {
            Glibc.close(fd)
            return nil
        }
        return endpoint
    }

    fileprivate func readable(_ endpoint: ProxyEndpoint) {
        let fromClient = endpoint === client
        if fromClient && !readsFromClient { return }
        guard let destination = fromClient ? server : client else { return }
        // A bounded number of reads per wake-up: the socket is watched level-triggered.
        for _ in 0..<64 {
            let count = buffer.withUnsafeMutableBytes { recv(endpoint.fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                destination.waiting.append(contentsOf: buffer[0..<count])
                if fromClient { clientBytesRead.add(count, ordering: .releasing) }
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            closeConnections()  // end of stream or error on either side ends both
            return
        }
        write(destination)
        updateInterests()
    }

    fileprivate func writable(_ endpoint: ProxyEndpoint) {
        write(endpoint)
        updateInterests()
    }

    private func write(_ endpoint: ProxyEndpoint) {
        if endpoint === client && !forwardsToClient { return }
        while endpoint.waitingStart < endpoint.waiting.count {
            let written = endpoint.waiting.withUnsafeBytes { bytes in
                send(endpoint.fd, bytes.baseAddress! + endpoint.waitingStart, bytes.count - endpoint.waitingStart,
                     Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                endpoint.waitingStart += written
                continue
            }
            if written < 0 && errno == EINTR { continue }
            // EAGAIN also while the connect to the server is still under way.
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            closeConnections()
            return
        }
        endpoint.waiting.removeAll(keepingCapacity: true)
        endpoint.waitingStart = 0
    }

    private func updateInterests() {
        if let client {
            var interest: IOInterest = readsFromClient ? .readable : []
            if forwardsToClient && client.waitingCount > 0 { interest.insert(.writable) }
            client.setInterest(interest, on: loop)
        }
        if let server {
            server.setInterest(server.waitingCount > 0 ? [.readable, .writable] : .readable, on: loop)
        }
    }

    private func closeConnections() {
        for endpoint in [client, server].compactMap({ $0 }) {
            loop.unregister(fd: endpoint.fd)
            Glibc.close(endpoint.fd)
        }
        client = nil
        server = nil
    }
}

/// One socket of a ``PausableTCPProxy`` and the bytes waiting to be written to it. Loop thread.
private final class ProxyEndpoint: EventLoopIOHandler {
    let fd: Int32
    var waiting: [UInt8] = []
    var waitingStart = 0
    private weak var proxy: PausableTCPProxy?
    private var interest: IOInterest = []

    init(proxy: PausableTCPProxy, fd: Int32) {
        self.proxy = proxy
        self.fd = fd
    }

    var waitingCount: Int { waiting.count - waitingStart }

    func setInterest(_ newInterest: IOInterest, on loop: EventLoop) {
        guard newInterest != interest else { return }
        interest = newInterest
        loop.setInterest(fd: fd, newInterest)
    }

    func eventLoopReadable() { proxy?.readable(self) }
    func eventLoopWritable() { proxy?.writable(self) }
    func eventLoopDidStop() { Glibc.close(fd) }
}

/// The listening socket of a ``PausableTCPProxy``. Loop thread.
private final class ProxyListener: EventLoopIOHandler {
    let fd: Int32
    private weak var proxy: PausableTCPProxy?

    init(proxy: PausableTCPProxy, fd: Int32) {
        self.proxy = proxy
        self.fd = fd
    }

    func eventLoopReadable() { proxy?.accept() }
    func eventLoopWritable() {}
    func eventLoopDidStop() { Glibc.close(fd) }
}
