#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import HTTP2

/// Connects a blocking TLS client (ALPN h2, verifying the CA in `caFile`, at most `maxVersion`
/// when given) to 127.0.0.1:`port`, completes the handshake and runs `body` on the connection
/// (reads time out after 5 s). For tests that play a client no HTTP/2 library would be.
public func withRawTLSClient<T>(port: Int, caFile: String, maxVersion: Int32? = nil,
                                _ body: (OpaquePointer) throws -> T) throws -> T {
    guard let context = SSL_CTX_new(TLS_client_method()) else { throw HTTP2Error(.tlsConfiguration, "SSL_CTX_new") }
    defer { SSL_CTX_free(context) }
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    _ = SSL_CTX_load_verify_locations(context, caFile, nil)
    if let maxVersion { _ = apns_ssl_ctx_set_max_proto_version(context, maxVersion) }
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
    return try body(ssl)
}

/// Reads until the server closes the connection; true when it did, false when 5 s passed
/// without a byte (the read timeout of ``withRawTLSClient(port:caFile:maxVersion:_:)``).
public func readUntilTheServerCloses(_ ssl: OpaquePointer) -> Bool {
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = SSL_read(ssl, &buffer, Int32(buffer.count))
        if count > 0 { continue }
        let error = SSL_get_error(ssl, count)
        let timedOut = errno == EAGAIN || errno == EWOULDBLOCK
        // A timeout shows as WANT_READ (or as a failed system call with EAGAIN): the server did
        // not hang up. EOF, close_notify or a reset: it did.
        return !(error == SSL_ERROR_WANT_READ || (error == SSL_ERROR_SYSCALL && timedOut))
    }
}

/// The client preface, SETTINGS and the HEADERS of a POST to `/` on stream 1 that never ends
/// (no END_STREAM): a request the server waits on for ever.
public func unfinishedHTTP2Request(authority: String) -> [UInt8] {
    rawHTTP2Request(authority: authority, finished: false)
}

/// The client preface, SETTINGS (with SETTINGS_INITIAL_WINDOW_SIZE `initialWindowSize` when
/// given) and the HEADERS of a POST to `/` on stream 1, with END_STREAM when `finished`.
public func rawHTTP2Request(authority: String, finished: Bool, initialWindowSize: UInt32? = nil) -> [UInt8] {
    var bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    if let initialWindowSize {
        bytes += [0, 0, 6, 0x04, 0, 0, 0, 0, 0, 0, 0x04]               // SETTINGS: INITIAL_WINDOW_SIZE
        bytes += [UInt8(initialWindowSize >> 24 & 0xFF), UInt8(initialWindowSize >> 16 & 0xFF),
                  UInt8(initialWindowSize >> 8 & 0xFF), UInt8(initialWindowSize & 0xFF)]
    } else {
        bytes += [0, 0, 0, 0x04, 0, 0, 0, 0, 0]                      // SETTINGS, empty
    }
    // :method POST (static 3), :scheme https (static 7), :path / (static 4), then :authority
    // as a literal with incremental indexing of static name 1.
    let block: [UInt8] = [0x83, 0x87, 0x84, 0x41, UInt8(authority.utf8.count)] + Array(authority.utf8)
    let length = UInt32(block.count)
    bytes += [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
    bytes += [0x01, finished ? 0x05 : 0x04, 0, 0, 0, 1]              // HEADERS, END_HEADERS (+ END_STREAM), stream 1
    return bytes + block
}
