#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
@testable import HTTP2
import APNsSimulator
import Synchronization
import Observability

/// A blocking, single-connection TLS server written straight on OpenSSL: it completes the
/// handshake (with or without ALPN), sends `payload`, then waits for the client to hang up.
/// Lets tests play a misbehaving peer that HTTP2Server would never be.
final class RawTLSServer: @unchecked Sendable {
    let port: Int
    private let listenFD: Int32
    private let context: OpaquePointer
    private let done = Locked(false)

    init(credentials: TestCredentials, offerALPN: Bool, payload: [UInt8]) throws {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw HTTP2Error(.tlsConfiguration, "SSL_CTX_new") }
        self.context = context
        guard SSL_CTX_use_certificate_chain_file(context, credentials.files.serverCertificatePath) == 1,
              SSL_CTX_use_PrivateKey_file(context, credentials.files.serverPrivateKeyPath, SSL_FILETYPE_PEM) == 1 else {
            throw HTTP2Error(.tlsConfiguration, "cannot load server credentials")
        }
        if offerALPN { SSL_CTX_set_alpn_select_cb(context, tlsSelectALPN, nil) }
        let address = try SocketAddress.resolve(host: "127.0.0.1", port: 0, passive: true)[0]
        listenFD = try address.listen(backlog: 4)
        _ = fcntl(listenFD, F_SETFL, fcntl(listenFD, F_GETFL, 0) & ~O_NONBLOCK)
        port = SocketAddress.localPort(of: listenFD)
        try ThreadStarter.start(name: "raw-tls-server", detached: true) { [self] in
            serveOne(payload: payload)
            done.withLock { $0 = true }
        }
    }

    private func serveOne(payload: [UInt8]) {
        let fd = accept(listenFD, nil, nil)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let ssl = SSL_new(context) else { return }
        defer { SSL_free(ssl) }
        SSL_set_fd(ssl, fd)
        guard SSL_accept(ssl) == 1 else { return }
        if !payload.isEmpty { _ = SSL_write(ssl, payload, Int32(payload.count)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while SSL_read(ssl, &buffer, Int32(buffer.count)) > 0 {}
    }

    /// Stops listening and waits (up to 5 s) for the serving thread.
    func stop() async throws {
        shutdown(listenFD, Int32(SHUT_RDWR))
        _ = await eventually(timeout: .seconds(5)) { done.withLock { $0 } }
        close(listenFD)
        SSL_CTX_free(context)
    }
}

/// A blocking TLS client (ALPN h2, verifying the test CA) that sends `payload` after the
/// handshake and reports whether the server then closed the connection within 5 s.
func rawTLSClientSendsGarbage(port: Int, credentials: TestCredentials, payload: [UInt8]) throws -> Bool {
    guard let context = SSL_CTX_new(TLS_client_method()) else { throw HTTP2Error(.tlsConfiguration, "SSL_CTX_new") }
    defer { SSL_CTX_free(context) }
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    _ = SSL_CTX_load_verify_locations(context, credentials.files.caCertificatePath, nil)
    let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
    _ = SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count))
    let address = try SocketAddress.resolve(host: "127.0.0.1", port: port)[0]
    let fd = try address.startConnect()
    defer { close(fd) }
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) & ~O_NONBLOCK)
    var pollDescriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    _ = poll(&pollDescriptor, 1, 5000)
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    guard let ssl = SSL_new(context) else { throw HTTP2Error(.tlsConfiguration, "SSL_new") }
    defer { SSL_free(ssl) }
    SSL_set_fd(ssl, fd)
    guard SSL_connect(ssl) == 1 else { throw HTTP2Error(.tlsHandshake, "raw client handshake failed") }
    _ = SSL_write(ssl, payload, Int32(payload.count))
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = SSL_read(ssl, &buffer, Int32(buffer.count))
        if count > 0 { continue }
        let error = SSL_get_error(ssl, count)
        // EOF or close_notify or reset: the server hung up. A timeout (EAGAIN) means it did not.
        return !(error == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
    }
}
