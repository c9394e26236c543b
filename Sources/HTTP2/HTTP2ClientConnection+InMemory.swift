import CNGHTTP2

// A client connection driven from memory instead of a TLS socket: the server's bytes go straight
// to the connection's nghttp2 session (`nghttp2_session_mem_recv`) and what the client writes is
// collected. Everything past the socket is the production code: the same session, callbacks,
// stream bookkeeping, body cap and delegate calls. It exists for the fuzzer of the response path
// (fuzz/targets/fuzz-http2-response) and for the regression tests of what it finds; the bridge
// never calls it, and nothing on the socket path goes through it.

extension HTTP2ClientConnection {
    /// A connection with no socket whose client session is started (preface and SETTINGS
    /// queued), as after a TLS handshake. Loop thread.
    package static func makeInMemory(loop: EventLoop, tls: TLSClientContext,
                                     delegate: HTTP2ClientConnectionDelegate,
                                     streamTimeoutNanoseconds: UInt64 = 10_000_000_000) throws -> HTTP2ClientConnection {
        precondition(loop.inEventLoop, "in-memory connections run on their loop's thread")
        let connection = HTTP2ClientConnection(host: "in-memory.invalid", port: 443, tls: tls, loop: loop,
                                               delegate: delegate, streamTimeoutNanoseconds: streamTimeoutNanoseconds)
        connection.state = .connecting
        connection.session = try HTTP2Session.makeClient(userData: Unmanaged.passUnretained(connection).toOpaque(),
                                                         memory: connection.sessionMemory)
        connection.state = .waitingForSettings
        return connection
    }

    /// Feeds `serverBytes` to the session as one read, then returns what the client writes in
    /// answer (as the socket path does: read everything available, then write). When the
    /// session rejects the bytes or wants neither to read nor to write any more, the connection
    /// finishes as it does over a socket: every open stream fails and the delegate hears
    /// `connectionDidClose`. Loop thread.
    package func receiveInMemory(_ serverBytes: [UInt8]) -> [UInt8] {
        precondition(loop.inEventLoop, "in-memory connections run on their loop's thread")
        guard state != .closed, let session else { return [] }
        var closeReason: String?
        if !serverBytes.isEmpty {
            let consumed = serverBytes.withUnsafeBufferPointer { bytes in
                // invariant: a non-empty array has storage.
                nghttp2_session_mem_recv(session, bytes.baseAddress!, bytes.count)
            }
            if consumed < 0 {
                closeReason = "HTTP/2 protocol error: \(String(cString: nghttp2_strerror(Int32(consumed))))"
            }
        }
        let written = sendInMemory()
        if closeReason == nil, self.session != nil,
           nghttp2_session_want_read(session) == 0, nghttp2_session_want_write(session) == 0 {
            closeReason = lastProtocolError.map { "HTTP/2 protocol error: \($0)" } ?? TLSConnection.sessionFinishedReason
        }
        if let closeReason { finish(reason: closeReason) }
        return written
    }

    /// What the client has queued to write (preface, SETTINGS, requests, acknowledgements…).
    /// Loop thread.
    package func sendInMemory() -> [UInt8] {
        precondition(loop.inEventLoop, "in-memory connections run on their loop's thread")
        var written: [UInt8] = []
        while let session = self.session {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            guard count > 0, let chunk else {
                if count < 0 { finish(reason: "HTTP/2 error: \(String(cString: nghttp2_strerror(Int32(count))))") }
                break
            }
            if let streamID = appendSentFrame(UnsafeBufferPointer(start: chunk, count: count), to: &written) {
                writtenStreams.written(streamID: streamID)
            }
        }
        return written
    }
}
