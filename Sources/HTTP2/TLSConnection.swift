#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
import COpenSSL

/// What a ``TLSConnection`` reports to the HTTP/2 connection that owns it (loop thread only).
package protocol TLSConnectionOwner: AnyObject {
    /// TCP is connected and the handshake finished with ALPN "h2". The owner creates its
    /// nghttp2 session, assigns ``TLSConnection/session`` and submits its SETTINGS; the
    /// connection then reads what already arrived and flushes.
    func tlsConnectionDidCompleteHandshake(_ connection: TLSConnection)
    /// The socket and `SSL*` are gone and ``TLSConnection/session`` was cleared. Never called
    /// from inside an nghttp2 call, so the owner may delete its session here.
    func tlsConnection(_ connection: TLSConnection, didCloseWithReason reason: String)
    /// Appends one frame the session wrote (`nghttp2_session_mem_send`) to the bytes waiting for
    /// the socket. The client swaps its fields encoded once into HEADERS frames here
    /// (``HTTP2EncodedOnceSwaps``); by default the frame goes as it is.
    func tlsConnection(_ connection: TLSConnection, append frame: UnsafeBufferPointer<UInt8>, to output: inout [UInt8])
}

extension TLSConnectionOwner {
    package func tlsConnection(_ connection: TLSConnection, append frame: UnsafeBufferPointer<UInt8>,
                               to output: inout [UInt8]) {
        output.append(contentsOf: frame)
    }
}

/// Non-blocking TLS over one TCP socket, pumping bytes between the `SSL*` and an nghttp2 session
/// with the mem API. Shared by the client and the server side.
///
/// Thread ownership: created, driven and closed on `loop`'s thread only; it owns the socket and
/// the `SSL*`; it borrows the owner's `nghttp2_session*`.
///
/// - Reads: `SSL_read` into the loop's fixed buffer until `WANT_READ`, each chunk fed to
///   `nghttp2_session_mem_recv`; then one flush. Reading pauses while ``outputHighWater`` bytes
///   wait for a peer that does not read (backpressure both ways).
/// - Writes: `nghttp2_session_mem_send` chunks are coalesced into one output buffer (`mem_send`
///   is not called while ``outputHighWater`` bytes are pending), written with `SSL_write` in
///   partial-write mode; EPOLLOUT is armed only while bytes are pending.
/// - Re-entrancy: a flush or close requested from inside an nghttp2 callback is deferred until
///   the nghttp2 call returns.
package final class TLSConnection: EventLoopIOHandler, EventLoopFlushable, @unchecked Sendable {
    enum State { case connecting, handshaking, open, closed }

    /// Stop calling `mem_send` while this many bytes wait for the socket.
    static let outputHighWater = 1 << 20
    /// The most plaintext one TLS record carries (RFC 8446 §5.1): the longest `SSL_write`.
    static let recordPlaintextBytes = 16_384
    /// The start of the close reason when the TCP connect itself failed.
    static let connectFailedPrefix = "connect failed: "
    /// The close reason when nghttp2 wants neither to read nor to write any more.
    static let sessionFinishedReason = "HTTP/2 session finished"

    package let loop: EventLoop
    /// The owner's nghttp2 session, set after the handshake.
    package var session: OpaquePointer?
    private(set) var state: State
    private let fd: Int32
    private var ssl: OpaquePointer?
    private var owner: TLSConnectionOwner?
    /// No runtime exclusivity check: loop thread only, and no access to it runs other code of
    /// this class (bytes from `nghttp2_session_mem_send`, handed to `SSL_write`).
    @exclusivity(unchecked) private var output: [UInt8] = []
    private var outputStart = 0
    /// Bytes put into the output since the connection opened (the owner's appends). No runtime
    /// exclusivity check, as for `output`: loop thread only, read by the owner per HEADERS frame.
    @exclusivity(unchecked) private(set) var bytesProduced = 0
    /// Bytes of the output the socket took since the connection opened (`SSL_write`'s counts:
    /// whole TLS records, in partial-write mode).
    @exclusivity(unchecked) private(set) var bytesWritten = 0
    /// The length of the `SSL_write` that would block, repeated exactly on the next try: given
    /// more, OpenSSL may finish the blocked record, start another that blocks too and report
    /// neither, so `bytesWritten` would lag what the kernel took.
    private var blockedWriteLength: Int?
    private var inSessionCall = false
    private var flushDeferred = false
    private var flushScheduled = false
    private var pendingClose: (reason: String, graceful: Bool)?
    private var readWantsWrite = false
    private var writeWantsRead = false
    private var readPaused = false
    /// Bytes handed to nghttp2 since its queued frames last moved to the output (``receive(_:)``).
    private var receivedSinceProduce = 0
    /// How many times reading paused for backpressure (loop thread; tests read it).
    private(set) var readPauses = 0
    private var interest: IOInterest = []
    private var ioSuspended = false

    /// Takes ownership of `fd` (connecting or connected) and `ssl`.
    package init(fd: Int32, ssl: OpaquePointer, loop: EventLoop, owner: TLSConnectionOwner, connecting: Bool) {
        self.fd = fd
        self.ssl = ssl
        self.loop = loop
        self.owner = owner
        self.state = connecting ? .connecting : .handshaking
        SSL_set_fd(ssl, fd)
    }

    deinit {
        if let ssl { SSL_free(ssl) }
        if state != .closed { Glibc.close(fd) }
    }

    /// Bytes waiting for the socket.
    var pendingOutputCount: Int { output.count - outputStart }

    /// Registers with the loop and starts connecting / handshaking. Loop thread.
    package func start() {
        loop.preconditionInEventLoop()
        let initial: IOInterest = state == .connecting ? .writable : .readable
        do {
            try loop.register(fd: fd, interest: initial, handler: self)
            interest = initial
        } catch {
            teardown(reason: "\(error)", graceful: false)
            return
        }
        if state == .handshaking { handshake() }
    }

    // MARK: - Owner API

    /// Produces and writes pending HTTP/2 output now (deferred when inside an nghttp2 call).
    package func flush() {
        loop.preconditionInEventLoop()
        guard state == .open, !ioSuspended else { return }
        if inSessionCall {
            flushDeferred = true
            return
        }
        pump()
    }

    /// Flushes once at the end of the current loop iteration (coalesces many small submissions).
    package func scheduleFlush() {
        guard state == .open, !ioSuspended, !flushScheduled else { return }
        flushScheduled = true
        loop.scheduleFlush(self)
    }

    package func flushAtEndOfIteration() {
        flushScheduled = false
        flush()
    }

    /// Closes the connection. `graceful` first writes what is pending (e.g. a GOAWAY) if the
    /// socket takes it right away, and sends a TLS close_notify.
    package func close(reason: String, graceful: Bool) {
        loop.preconditionInEventLoop()
        guard state != .closed else { return }
        if ioSuspended {
            teardown(reason: reason, graceful: false)
            return
        }
        if pendingClose == nil { pendingClose = (reason, graceful) }
        if inSessionCall { return }
        // invariant: set just above if it was nil.
        let close = pendingClose!
        if close.graceful && state == .open {
            pump()  // produces and writes what it can, then tears down with the pending reason
        } else {
            teardown(reason: close.reason, graceful: close.graceful)
        }
    }

    /// Stops reading and writing without closing: the peer sees a connection that takes bytes
    /// and answers nothing, PINGs included, while TCP stays up until
    /// ``close(reason:graceful:)`` or until the peer closes. What arrives meanwhile is read from
    /// the socket and thrown away unread by TLS and HTTP/2, so the end of the peer's stream (or
    /// a reset) is still seen and closes the connection: a suspended connection the peer gave up
    /// on does not keep its descriptor. Loop thread. For test servers that play a half-open peer.
    package func suspendIO() {
        loop.preconditionInEventLoop()
        guard state == .open, !ioSuspended else { return }
        ioSuspended = true
        setInterest(.readable)
    }

    /// The `SSL*` while the connection is not closed (e.g. to read the peer's certificate). Loop thread.
    package var sslHandle: OpaquePointer? { ssl }

    // MARK: - Events

    package func eventLoopReadable() {
        if ioSuspended {
            discardUntilPeerCloses()
            return
        }
        switch state {
        case .connecting: finishConnect()
        case .handshaking: handshake()
        case .open:
            readAvailable()
            if writeWantsRead { flush() }
        case .closed: break
        }
    }

    package func eventLoopDidStop() {
        teardown(reason: "event loop stopped", graceful: false)
    }

    package func eventLoopWritable() {
        if ioSuspended { return }
        switch state {
        case .connecting: finishConnect()
        case .handshaking: handshake()
        case .open:
            if readWantsWrite { readAvailable() }
            flush()
            if readPaused && state == .open && pendingOutputCount < Self.outputHighWater { readAvailable() }
        case .closed: break
        }
    }

    private func finishConnect() {
        let error = SocketAddress.pendingError(of: fd)
        guard error == 0 else {
            teardown(reason: "\(Self.connectFailedPrefix)\(String(cString: strerror(error)))", graceful: false)
            return
        }
        SocketAddress.setNoDelay(fd)
        state = .handshaking
        handshake()
    }

    private func handshake() {
        guard let ssl else { return }
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            guard Self.negotiatedH2(ssl) else {
                teardown(reason: "TLS handshake failed: ALPN did not negotiate h2", graceful: false)
                return
            }
            state = .open
            setInterest(.readable)
            owner?.tlsConnectionDidCompleteHandshake(self)
            // With read-ahead, the peer's first frames may already sit inside the SSL object.
            readAvailable()
            return
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: setInterest(.readable)
        case SSL_ERROR_WANT_WRITE: setInterest([.readable, .writable])
        default: teardown(reason: "TLS handshake failed: \(handshakeFailureDetail(ssl))", graceful: false)
        }
    }

    private func handshakeFailureDetail(_ ssl: OpaquePointer) -> String {
        let verifyResult = SSL_get_verify_result(ssl)
        if verifyResult != X509_V_OK {
            return "certificate verification failed: \(String(cString: X509_verify_cert_error_string(verifyResult)))"
        }
        let detail = OpenSSLErrors.drain()
        return detail == "no OpenSSL error detail" ? "connection closed by peer" : detail
    }

    private static func negotiatedH2(_ ssl: OpaquePointer) -> Bool {
        var protocolName: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolName, &length)
        guard let protocolName, length == 2 else { return false }
        return protocolName[0] == UInt8(ascii: "h") && protocolName[1] == UInt8(ascii: "2")
    }

    // MARK: - Read path

    private func readAvailable() {
        readWantsWrite = false
        readPaused = false
        let buffer = loop.readBuffer
        // invariant: the loop's read buffer is allocated in EventLoop.init.
        let base = buffer.baseAddress!
        while state == .open, pendingClose == nil, !ioSuspended, let ssl {
            if pendingOutputCount >= Self.outputHighWater {
                // Backpressure: the peer does not read our output; stop reading its input.
                readPaused = true
                readPauses += 1
                break
            }
            ERR_clear_error()
            let count = SSL_read(ssl, base, Int32(buffer.count))
            if count > 0 {
                receive(UnsafeRawBufferPointer(start: base, count: Int(count)))
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ:
                break
            case SSL_ERROR_WANT_WRITE:
                readWantsWrite = true
            case SSL_ERROR_ZERO_RETURN:
                teardown(reason: "peer closed the connection", graceful: false)
                return
            case SSL_ERROR_SYSCALL:
                let detail = errno == 0 ? "peer closed the TCP connection" : String(cString: strerror(errno))
                teardown(reason: "connection lost: \(detail)", graceful: false)
                return
            default:
                teardown(reason: "TLS error: \(OpenSSLErrors.drain())", graceful: false)
                return
            }
            break
        }
        if let pendingClose {
            if pendingClose.graceful { pump() }
            teardown(reason: pendingClose.reason, graceful: pendingClose.graceful)
            return
        }
        pump()
    }

    /// Hands what was read to nghttp2 a slice at a time, moving what it queued in answer to the
    /// output once a slice's worth has gone in (at most 8 KiB between two moves, so at most 910
    /// frames; not after every small read, which would add a call per answer).
    ///
    /// nghttp2 counts the acknowledgements (PING, SETTINGS) and RST_STREAMs it holds unsent, and
    /// ends the session as a flood above 1,000: with a whole TLS record (up to 1,820 empty
    /// SETTINGS frames) fed at once, or several records before the next pump, a peer sending a
    /// burst of them would be cut off even though it reads every answer. A peer that does not
    /// read what is written still meets the output's high-water mark, which stops reading it,
    /// and then the flood limit.
    private func receive(_ bytes: UnsafeRawBufferPointer) {
        guard let session, let start = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        var offset = 0
        while offset < bytes.count, pendingClose == nil {
            let length = min(bytes.count - offset, Self.receiveSliceBytes)
            inSessionCall = true
            let consumed = nghttp2_session_mem_recv(session, start + offset, length)
            inSessionCall = false
            if consumed < 0 {
                let reason = "HTTP/2 protocol error: \(String(cString: nghttp2_strerror(Int32(consumed))))"
                // nghttp2 queued a GOAWAY for most protocol errors: try to send it, then close.
                pendingClose = pendingClose ?? (reason, true)
                return
            }
            offset += length
            receivedSinceProduce += length
            if receivedSinceProduce >= Self.receiveSliceBytes { produce() }
        }
    }

    /// What ``receive(_:)`` hands nghttp2 at once: 455 frames of the smallest kind (9 bytes).
    static let receiveSliceBytes = 4096

    /// While suspended: reads what the peer sent straight from the socket and drops it; closes
    /// at the end of the peer's stream or on a socket error. A few buffers per wake-up, so a peer
    /// that keeps sending cannot hold the loop (the socket stays readable and is seen again).
    private func discardUntilPeerCloses() {
        guard state == .open else { return }
        let buffer = loop.readBuffer
        for _ in 0..<16 {
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count > 0 { continue }
            if count == 0 {
                teardown(reason: "peer closed the connection", graceful: false)
                return
            }
            let error = errno
            if error == EINTR { continue }
            if error == EAGAIN || error == EWOULDBLOCK { return }
            teardown(reason: "connection lost: \(String(cString: strerror(error)))", graceful: false)
            return
        }
    }

    // MARK: - Write path

    /// Produces output from the session (up to the high-water mark) and writes it, until the
    /// session has nothing more or the socket would block.
    private func pump() {
        flushDeferred = false
        guard !ioSuspended else { return }
        while state == .open {
            produce()
            if let pendingClose {
                if pendingClose.graceful { _ = writePending() }
                teardown(reason: pendingClose.reason, graceful: pendingClose.graceful)
                return
            }
            if pendingOutputCount == 0 { break }
            guard writePending() else { break }
        }
        guard state == .open else { return }
        var newInterest: IOInterest = readPaused ? [] : .readable
        // Reading paused for backpressure resumes in `eventLoopWritable`: while paused, the
        // socket stays watched for writability even when this pump wrote everything, or nothing
        // would ever resume it.
        if pendingOutputCount > 0 || readWantsWrite || readPaused { newInterest.insert(.writable) }
        setInterest(newInterest)
        if let session, nghttp2_session_want_read(session) == 0, nghttp2_session_want_write(session) == 0,
           pendingOutputCount == 0 {
            teardown(reason: Self.sessionFinishedReason, graceful: true)
        }
    }

    private func produce() {
        receivedSinceProduce = 0
        // The owner is cleared after the session (`teardown`), so with a session there is an
        // owner. Unwrapped here, once: an `if let` inside the loop retained and released it per frame.
        guard let session, let owner = self.owner else { return }
        if outputStart > 0 && outputStart * 2 >= output.count {
            output.removeFirst(outputStart)  // the unwritten bytes move; SSL accepts a moving buffer
            outputStart = 0
        }
        inSessionCall = true
        defer { inSessionCall = false }
        while pendingOutputCount < Self.outputHighWater {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            if count < 0 {
                pendingClose = pendingClose ?? ("HTTP/2 error: \(String(cString: nghttp2_strerror(Int32(count))))", false)
                return
            }
            guard count > 0, let chunk else { return }
            let countBefore = output.count
            owner.tlsConnection(self, append: UnsafeBufferPointer(start: chunk, count: count), to: &output)
            bytesProduced += output.count - countBefore
        }
    }

    /// Writes pending output. Returns true when everything was written; false when the socket
    /// would block or the connection failed (then it is closed).
    private func writePending() -> Bool {
        guard let ssl else { return false }
        writeWantsRead = false
        while outputStart < output.count {
            ERR_clear_error()
            // One record's worth at most (partial-write mode returns after each record anyway).
            // invariant: pending bytes only grow while a write is blocked, so the repeated
            // length is still there.
            let length = blockedWriteLength ?? min(output.count - outputStart, Self.recordPlaintextBytes)
            let written = output.withUnsafeBytes { bytes in
                // invariant: outputStart < output.count, so the buffer is non-empty.
                SSL_write(ssl, bytes.baseAddress! + outputStart, Int32(length))
            }
            if written > 0 {
                blockedWriteLength = nil
                outputStart += Int(written)
                bytesWritten += Int(written)
                continue
            }
            switch SSL_get_error(ssl, written) {
            case SSL_ERROR_WANT_WRITE:
                blockedWriteLength = length
                return false
            case SSL_ERROR_WANT_READ:
                blockedWriteLength = length
                writeWantsRead = true
                return false
            default:
                let detail = errno == 0 ? OpenSSLErrors.drain() : String(cString: strerror(errno))
                teardown(reason: "connection lost: write failed: \(detail)", graceful: false)
                return false
            }
        }
        output.removeAll(keepingCapacity: true)
        outputStart = 0
        return true
    }

    // MARK: - Teardown

    private func setInterest(_ newInterest: IOInterest) {
        guard newInterest != interest, state != .closed else { return }
        interest = newInterest
        loop.setInterest(fd: fd, newInterest)
    }

    private func teardown(reason: String, graceful: Bool) {
        guard state != .closed else { return }
        let wasOpen = state == .open
        state = .closed
        pendingClose = nil
        loop.unregister(fd: fd)
        if let ssl {
            if graceful && wasOpen {
                ERR_clear_error()
                _ = SSL_shutdown(ssl)  // best effort close_notify; the socket is non-blocking
            }
            SSL_free(ssl)
            self.ssl = nil
        }
        Glibc.close(fd)
        output = []
        outputStart = 0
        session = nil
        let owner = self.owner
        self.owner = nil
        owner?.tlsConnection(self, didCloseWithReason: reason)
    }
}
