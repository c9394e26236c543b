#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
@testable import HTTP2
import APNsSimulator
import Synchronization
import Observability

/// What became of a renegotiation a raw peer asked for.
enum RenegotiationOutcome: Equatable {
    /// The other side answered with a no_renegotiation alert.
    case refused
    /// The other side ran a second handshake on the live connection.
    case completed
    /// Neither: the connection ended otherwise (the OpenSSL reason code, 0 for none).
    case other(reason: Int32)

    /// Reads the outcome on `ssl` after the renegotiation ended or failed.
    static func read(_ ssl: OpaquePointer) -> RenegotiationOutcome {
        let reason = ERR_GET_REASON(ERR_peek_error())
        if reason == SSL_R_NO_RENEGOTIATION { return .refused }
        return SSL_renegotiate_pending(ssl) == 0 ? .completed : .other(reason: reason)
    }
}

/// A blocking, single-connection TLS server written straight on OpenSSL: it completes the
/// handshake (with or without ALPN), sends `payload`, then waits for the client to hang up.
/// Lets tests play a misbehaving peer that HTTP2Server would never be.
final class RawTLSServer: @unchecked Sendable {
    let port: Int
    private let listenFD: Int32
    private let context: OpaquePointer
    private let requestRenegotiation: Bool
    private let done = Locked(false)
    private let outcome = Locked<RenegotiationOutcome?>(nil)

    /// With `requestRenegotiation` the server speaks TLS 1.2 (TLS 1.3 has no renegotiation) and
    /// sends a HelloRequest right after `payload`.
    init(credentials: TestCredentials, offerALPN: Bool, payload: [UInt8], requestRenegotiation: Bool = false) throws {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw HTTP2Error(.tlsConfiguration, "SSL_CTX_new") }
        self.context = context
        self.requestRenegotiation = requestRenegotiation
        guard SSL_CTX_use_certificate_chain_file(context, credentials.files.serverCertificatePath) == 1,
              SSL_CTX_use_PrivateKey_file(context, credentials.files.serverPrivateKeyPath, SSL_FILETYPE_PEM) == 1 else {
            throw HTTP2Error(.tlsConfiguration, "cannot load server credentials")
        }
        if offerALPN { SSL_CTX_set_alpn_select_cb(context, tlsSelectALPN, nil) }
        if requestRenegotiation { _ = apns_ssl_ctx_set_max_proto_version(context, TLS1_2_VERSION) }
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
        if requestRenegotiation {
            guard SSL_renegotiate(ssl) == 1, SSL_do_handshake(ssl) == 1 else {
                outcome.withLock { $0 = .other(reason: ERR_GET_REASON(ERR_peek_error())) }
                return
            }
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while SSL_read(ssl, &buffer, Int32(buffer.count)) > 0 {}
        if requestRenegotiation { outcome.withLock { $0 = .read(ssl) } }
    }

    /// The renegotiation's outcome, once the connection has ended (nil before, or when none was asked for).
    var renegotiation: RenegotiationOutcome? { outcome.withLock { $0 } }

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
    try withRawTLSClient(port: port, credentials: credentials) { ssl in
        _ = SSL_write(ssl, payload, Int32(payload.count))
        return readUntilTheServerCloses(ssl)
    }
}

/// A blocking TLS 1.2 client (ALPN h2, verifying the test CA) that reads the server's first
/// record (an HTTP/2 server's SETTINGS, written in one piece with what follows it), asks for
/// a renegotiation, and reports what the server made of it.
func rawTLSClientAsksForRenegotiation(port: Int, credentials: TestCredentials) throws -> RenegotiationOutcome {
    try withRawTLSClient(port: port, credentials: credentials, maxVersion: TLS1_2_VERSION) { ssl in
        // Application data arriving in the middle of the new handshake would end it with
        // "unexpected record" before the server could answer.
        var buffer = [UInt8](repeating: 0, count: 4096)
        guard SSL_read(ssl, &buffer, Int32(buffer.count)) > 0,
              SSL_renegotiate(ssl) == 1 else { return .other(reason: ERR_GET_REASON(ERR_peek_error())) }
        _ = SSL_do_handshake(ssl)
        return .read(ssl)
    }
}

/// ``withRawTLSClient(port:caFile:maxVersion:_:)`` trusting the test CA.
private func withRawTLSClient<T>(port: Int, credentials: TestCredentials, maxVersion: Int32? = nil,
                                 _ body: (OpaquePointer) throws -> T) throws -> T {
    try withRawTLSClient(port: port, caFile: credentials.files.caCertificatePath, maxVersion: maxVersion, body)
}
