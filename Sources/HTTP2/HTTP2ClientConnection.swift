#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
import Observability

/// One HTTP/2 client connection over TLS (ALPN "h2" required), multiplexing many streams.
///
/// Thread ownership: everything except `init` runs on `loop`'s thread; the connection owns its
/// socket, `SSL*` and `nghttp2_session*` there. `start()` called elsewhere hops to the loop.
/// The connection keeps itself alive while open and holds its delegate strongly until
/// `connectionDidClose` (the last call), which breaks any owner ↔ connection cycle.
///
/// Streams: per-stream state lives in an `HTTP2StreamTable` keyed by stream id; the request body is read
/// by an `nghttp2_data_provider` straight from the request's `[UInt8]`. One periodic sweep timer
/// per connection enforces the per-stream deadline (and the 10 s connect/handshake deadline).
public final class HTTP2ClientConnection: @unchecked Sendable {
    enum State { case idle, connecting, waitingForSettings, ready, goingAway, closed }

    /// Per-stream bookkeeping, loop thread only.
    struct Stream {
        let tag: UInt64
        let startedAt: UInt64
        let requestBody: [UInt8]
        /// The path its HEADERS frame gets in place of the stand-in (``HTTP2PlainPath``), if any.
        /// Taken when the frame leaves: the path is not needed after it.
        var plainPath: HTTP2PlainPath?
        var requestBodyOffset = 0
        var status = 0
        var headers: [HTTP2HeaderField] = []
        var headerBytes = 0
        var responseBody: [UInt8] = []
        var responseComplete = false
        /// The body went past `maxResponseBodyBytes`: the stream was reset, the answer is what was kept.
        var responseBodyCut = false
    }

    /// The default cap on what is kept of a response body (see `maxResponseBodyBytes`).
    public static let defaultMaxResponseBodyBytes = 1 << 20
    /// The cap on response header fields kept per stream (APNs sends a handful); more are dropped.
    public static let maxResponseHeaderFields = 32
    /// The cap on the bytes of response header names and values kept per stream.
    public static let maxResponseHeaderBytes = 8 * 1024
    /// The most DATA a connection may read for nothing (past a body's cap, or on streams it reset,
    /// as a peer ignoring RST_STREAM sends) out of one refill of its window (every 8 MiB read);
    /// past it the connection ends with GOAWAY ENHANCE_YOUR_CALM.
    public static let maxDiscardedDataBytes = 4 << 20
    /// The most streams a connection opens at once, whatever the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS: APNs announces 1000, and a larger value (up to 2^32 - 1
    /// from a hostile or misconfigured endpoint) would let one connection take every notification
    /// in flight, each with its response buffers. A smaller announced value is obeyed as it is.
    public static let maxStreamsPerConnection = 1000
    /// How long connecting, the TLS handshake and the first SETTINGS may take.
    static let connectTimeoutNanoseconds: UInt64 = 10_000_000_000

    /// The server's host name or IP literal (also the TLS name that is verified).
    public let host: String
    /// The server's port.
    public let port: Int
    /// The loop that owns this connection.
    public let loop: EventLoop
    let tlsContext: TLSClientContext
    let streamTimeoutNanoseconds: UInt64
    /// What is read of each response body. A body that goes past it ends the stream: the client
    /// resets it (CANCEL) and the answer completes with its status, headers and the first
    /// `maxResponseBodyBytes` bytes. Memory and reading per stream stay bounded, even against a
    /// peer that sends DATA without end.
    let maxResponseBodyBytes: Int
    /// Response header names the caller expects on most answers, each with the `String` a field
    /// of that name gets (`init`'s `expectedResponseHeaderNames`): no `String` made from the
    /// name's bytes, and no UTF-8 check, per answer.
    let expectedResponseHeaderNames: [(bytes: StaticString, name: String)]
    let authority: String
    let logger = Logger(label: "http2.client")

    var delegate: HTTP2ClientConnectionDelegate?
    var state: State = .idle
    var session: OpaquePointer?
    /// The session's allocator (free lists of its small blocks). It outlives every session of
    /// the connection: `finish` and `deinit` delete the session before it goes.
    let sessionMemory = HTTP2SessionMemory()
    /// No runtime exclusivity check (about ten per stream): loop thread only, and no access to it
    /// calls out (the callbacks change a stream through static helpers, and the delegate hears
    /// of a stream only after it left the table).
    @exclusivity(unchecked) var streams = HTTP2StreamTable<Stream>()
    /// The header list of the last response, emptied with its capacity kept, for the next
    /// response's headers: APNs answers every notification with a header or two, and a stream's
    /// HEADERS and its close arrive in the same read, so one spare saves an allocation per
    /// answer. Loop thread only, like `streams`.
    @exclusivity(unchecked) var spareHeaders: [HTTP2HeaderField] = []
    var goAwayLastStreamID = Int32.max
    var goAwayErrorCode: UInt32?
    var lastProtocolError: String?
    /// Which streams' HEADERS frames went into the output, and which the socket took. A stream
    /// the server cannot have processed ends `.refused` (re-sent without counting as an
    /// attempt), not as a request the server may have seen: at its deadline, when its frame
    /// never entered the output (``HTTP2WrittenStreams/highestProduced``: a frame in the output
    /// still goes out after the stream's reset); when the connection is lost, when the socket
    /// never took its frame (``HTTP2WrittenStreams/highest``: the output is gone with it).
    /// No runtime exclusivity check: loop thread only, updated per HEADERS frame.
    @exclusivity(unchecked) var writtenStreams = HTTP2WrittenStreams()
    /// Whether the connection was ended for reading more than `maxDiscardedDataBytes` of one
    /// window refill for nothing.
    var discardCapReached = false
    /// What of the DATA read was kept in response bodies, per refill of the connection window.
    var discardedData = DiscardedDataMeter(limit: maxDiscardedDataBytes)
    /// The field requests carry a stand-in for until their HEADERS frame leaves, and the one
    /// before it (see `encodeOnce(_:value:)`). No runtime exclusivity check (two per request):
    /// loop thread only, and swapping calls no code of this class.
    @exclusivity(unchecked) private(set) var encodedOnceSwaps = HTTP2EncodedOnceSwaps()
    /// Whether paths written with `HeaderBlock.addPath` go out as plain literals
    /// (``HTTP2PlainPath``): read once here, not for every request.
    private let sendsPlainPaths = HTTP2PlainPath.deflaterAgrees
    /// The TLS connection while one is open or being set up (tests read its state on the loop).
    private(set) var connection: TLSConnection?
    /// The wait for the host's name lookup while it runs (withdrawn if the connection ends first).
    private var pendingResolution: HostResolver.Waiter?
    private var addresses: [SocketAddress] = []
    private var nextAddressIndex = 0
    private var lastConnectError = ""
    private var startedAt: UInt64 = 0
    /// When the attempt on the current address gives way to the next address, if there is one:
    /// the connect deadline's time left shared among the addresses left, at least a second each.
    private var addressDeadline: UInt64 = 0
    private var sweepTimer: EventLoopTimer?
    private var expiredScratch: [Int32] = []
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS, clamped to `maxStreamsPerConnection`.
    var peerMaxConcurrentStreams = 100
    /// When the last frame arrived (`CLOCK_MONOTONIC_COARSE` nanoseconds; 0: none yet): any frame
    /// proves the peer alive. No runtime exclusivity check (one per frame): loop thread only, and
    /// only ever stored or read.
    @exclusivity(unchecked) var lastFrameReceivedNanoseconds: UInt64 = 0

    /// How long ago the last frame arrived, or nil before the first. An age, not a time: the
    /// connection stamps frames on a clock of its own (a cheap coarse one, read per frame), and a
    /// caller timing on another clock (the pool's injected one) subtracts it from its own now.
    public func nanosecondsSinceLastFrame() -> UInt64? {
        let stamp = lastFrameReceivedNanoseconds
        guard stamp > 0 else { return nil }
        let now = coarseMonotonicNanoseconds()
        return now > stamp ? now - stamp : 0
    }

    /// Creates an idle connection; `start()` connects.
    ///
    /// - Parameters:
    ///   - streamTimeoutNanoseconds: the deadline of each stream, from `submit`.
    ///   - maxResponseBodyBytes: the cap on what is kept of each response body.
    ///   - expectedResponseHeaderNames: names (lower case) the server sends on most answers.
    public init(host: String, port: Int, tls: TLSClientContext, loop: EventLoop,
                delegate: HTTP2ClientConnectionDelegate, streamTimeoutNanoseconds: UInt64,
                maxResponseBodyBytes: Int = HTTP2ClientConnection.defaultMaxResponseBodyBytes,
                expectedResponseHeaderNames: [StaticString] = []) {
        self.maxResponseBodyBytes = max(0, maxResponseBodyBytes)
        self.expectedResponseHeaderNames = expectedResponseHeaderNames.map { ($0, $0.description) }
        self.host = host
        self.port = port
        self.tlsContext = tls
        self.loop = loop
        self.delegate = delegate
        self.streamTimeoutNanoseconds = max(streamTimeoutNanoseconds, 1_000_000)
        let hostPart = host.contains(":") ? "[\(host)]" : host
        self.authority = port == 443 ? hostPart : "\(hostPart):\(port)"
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Handshake done, server SETTINGS seen, not going away, not closed.
    public var isReady: Bool { state == .ready }

    /// Closed: its streams are being (or have been) reported, and the delegate told why.
    public var isClosed: Bool { state == .closed }

    /// Streams submitted and not finished yet.
    public var activeStreams: Int { streams.count }

    /// The streams this connection may have open at once: the server's current
    /// SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS arrive), at most
    /// ``maxStreamsPerConnection``.
    public var maxConcurrentStreams: Int { peerMaxConcurrentStreams }

    /// Whether the server sent GOAWAY.
    public var receivedGoAway: Bool { goAwayErrorCode != nil }

    /// Whether new streams may start: false before the connection is ready, after a GOAWAY, and
    /// once the connection's stream ids are used up (2^31 - 1 of them; then it must be replaced).
    public var canStartStreams: Bool {
        guard isReady, let session else { return false }
        return nghttp2_session_check_request_allowed(session) != 0
    }

    /// Whether the connection's stream ids are used up (2^31 - 1 of them): it takes no more
    /// streams and must be replaced. Not the only reason ``canStartStreams`` is false: a session
    /// nghttp2 is ending (after a protocol error) refuses new streams too.
    public var streamIDsUsedUp: Bool {
        guard let session else { return false }
        return nghttp2_session_get_next_stream_id(session) > UInt32(Int32.max)
    }

    /// How many more streams `submit` would accept now.
    public var availableStreams: Int { canStartStreams ? max(0, peerMaxConcurrentStreams - streams.count) : 0 }

    /// Makes the next stream use `streamID` (odd, client side). For tests that need a connection
    /// close to running out of stream ids. Loop thread.
    func setNextStreamIDForTesting(_ streamID: Int32) -> Bool {
        guard let session else { return false }
        return nghttp2_session_set_next_stream_id(session, streamID) == 0
    }

    /// Resolves the host (names off-loop through ``HostResolver/shared``: one lookup per host and
    /// port at a time, process-wide), connects without blocking, and runs the TLS handshake (SNI,
    /// host verification, ALPN "h2" required). The connect deadline covers the lookup too.
    public func start() {
        guard loop.inEventLoop else {
            loop.execute { self.start() }
            return
        }
        guard state == .idle else { return }
        state = .connecting
        startedAt = monotonicNanoseconds()
        scheduleSweep()
        if SocketAddress.isIPLiteral(host) {
            didResolve(Result { try SocketAddress.resolve(host: host, port: port) })
            return
        }
        pendingResolution = HostResolver.shared.resolve(host: host, port: port) { result in
            self.loop.execute { self.didResolve(result) }
        }
    }

    /// Submits a request; its answer arrives through the delegate with `tag`. Loop thread.
    ///
    /// - Returns: false (nothing submitted) when the connection is not ready or no stream slot
    ///   is free.
    public func submit(_ request: HTTP2Request, tag: UInt64) -> Bool {
        loop.preconditionInEventLoop()
        guard canSubmit, let session else { return false }
        let streamID = HeaderBlock.withRequestHeaders(authority: authority, request: request) { block in
            submitRequest(session, block, hasBody: !request.body.isEmpty)
        }
        return submitted(streamID, tag: tag, body: request.body, plainPath: nil)
    }

    /// Submits a POST whose `:path` and headers `writeFields` writes into the header block
    /// (`fieldCount` fields, `byteCount` bytes of names and values) from the caller's own values,
    /// with no `HTTP2Request` in between; otherwise as `submit(_:tag:)`. A path written with
    /// `HeaderBlock.addPath` goes out as a plain literal (``HTTP2PlainPath``).
    package func submit(tag: UInt64, body: [UInt8], fieldCount: Int, byteCount: Int,
                        writeFields: (inout HeaderBlock) -> Void) -> Bool {
        loop.preconditionInEventLoop()
        guard canSubmit, let session else { return false }
        let (streamID, plainPath) = HeaderBlock.withRequestHeaders(
            authority: authority, fieldCount: fieldCount, byteCount: byteCount, encodedOnce: encodedOnceSwaps.current,
            plainPath: sendsPlainPaths, writeFields: writeFields
        ) { block in
            (submitRequest(session, block, hasBody: !body.isEmpty), block.takePlainPath())
        }
        return submitted(streamID, tag: tag, body: body, plainPath: plainPath)
    }

    /// From now on, requests of `submit(tag:body:fieldCount:byteCount:writeFields:)` with the
    /// field `name: value` (a static name) have it HPACK-encoded once, not per request (see
    /// ``HTTP2EncodedOnceField``): what the peer receives is the same. A new value is used by
    /// the requests submitted after it; those submitted before and not written yet keep theirs
    /// (``HTTP2EncodedOnceSwaps``). nil goes back to encoding the field per request. The same
    /// value again costs a comparison. Loop thread.
    package func encodeOnce(_ name: StaticString, value: String?) {
        loop.preconditionInEventLoop()
        encodedOnceSwaps.encode(name, value: value)
    }

    private var canSubmit: Bool {
        guard state == .ready, let session, streams.count < peerMaxConcurrentStreams else { return false }
        return nghttp2_session_check_request_allowed(session) != 0
    }

    private func submitRequest(_ session: OpaquePointer, _ block: HeaderBlock, hasBody: Bool) -> Int32 {
        guard hasBody else { return nghttp2_submit_request(session, nil, block.nameValues, block.count, nil, nil) }
        var provider = nghttp2_data_provider()
        provider.read_callback = clientReadRequestBody
        return nghttp2_submit_request(session, nil, block.nameValues, block.count, &provider, nil)
    }

    private func submitted(_ streamID: Int32, tag: UInt64, body: [UInt8], plainPath: HTTP2PlainPath?) -> Bool {
        guard streamID > 0 else {
            logger.warning("nghttp2_submit_request failed",
                           metadata: ["error": String(cString: nghttp2_strerror(streamID))])
            return false
        }
        streams.insert(Stream(tag: tag, startedAt: coarseMonotonicNanoseconds(), requestBody: body, plainPath: plainPath),
                       forKey: streamID)
        return true
    }

    /// Writes what was submitted (call once per batch of `submit`s). Loop thread.
    public func flush() {
        loop.preconditionInEventLoop()
        connection?.flush()
    }

    /// Sends a PING (keep-alive). Loop thread. Returns false when the connection is not open.
    @discardableResult
    public func ping() -> Bool {
        loop.preconditionInEventLoop()
        guard let session, state == .ready || state == .goingAway || state == .waitingForSettings else { return false }
        guard nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) == 0 else { return false }
        connection?.flush()
        return true
    }

    /// Sends GOAWAY and closes; every open stream finishes `.connectionLost`, then
    /// `connectionDidClose`. Loop thread.
    public func close() {
        loop.preconditionInEventLoop()
        switch state {
        case .closed:
            return
        case .idle:
            finish(reason: "connection closed by client")
        default:
            guard let connection else {
                finish(reason: "connection closed by client")
                return
            }
            if let session { _ = nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue) }
            connection.close(reason: "connection closed by client", graceful: true)
        }
    }

    // MARK: - Connecting

    private func didResolve(_ result: Result<[SocketAddress], Error>) {
        loop.preconditionInEventLoop()
        pendingResolution = nil
        guard state == .connecting else { return }
        switch result {
        case .success(let resolved):
            addresses = resolved
            nextAddressIndex = 0
            connectNextAddress()
        case .failure(let error):
            finish(reason: "\(error)")
        }
    }

    private func connectNextAddress() {
        while nextAddressIndex < addresses.count {
            let address = addresses[nextAddressIndex]
            nextAddressIndex += 1
            do {
                let fd = try address.startConnect()
                let ssl: OpaquePointer
                do { ssl = try tlsContext.makeSSL(host: host) } catch {
                    Glibc.close(fd)
                    throw error
                }
                let connection = TLSConnection(fd: fd, ssl: ssl, loop: loop, owner: self, connecting: true)
                self.connection = connection
                let now = monotonicNanoseconds()
                let deadline = startedAt + Self.connectTimeoutNanoseconds
                let addressesLeft = UInt64(addresses.count - nextAddressIndex + 1)  // this one included
                addressDeadline = now + max((deadline > now ? deadline - now : 0) / addressesLeft, 1_000_000_000)
                connection.start()
                return
            } catch {
                lastConnectError = "\(error)"
            }
        }
        finish(reason: "cannot connect to \(host):\(port): \(lastConnectError)")
    }

    // MARK: - Deadlines

    private func scheduleSweep() {
        // While connecting, ten times a second: an address's share of the connect deadline is
        // then kept to within 100 ms (no stream waits yet, so the checks cost nothing).
        let interval = min(max(streamTimeoutNanoseconds / 4, 5_000_000), state == .connecting ? 100_000_000 : 1_000_000_000)
        // Strong: `finish` cancels the timer, and until then the connection is alive anyway (its
        // TLS connection or resolver holds it). A weak reference would give the connection a side
        // table, making every retain and release of it (several per stream, in the nghttp2
        // callbacks) take the runtime's slow path.
        sweepTimer = loop.schedule(afterNanoseconds: interval) { self.sweep() }
    }

    /// Resets streams older than the stream timeout (CANCEL → `.timeout`) and enforces the
    /// connect deadline. Runs periodically while the connection lives.
    private func sweep() {
        guard state != .closed else { return }
        let now = monotonicNanoseconds()
        if state == .connecting || state == .waitingForSettings {
            if now - startedAt > Self.connectTimeoutNanoseconds {
                if let connection {
                    connection.close(reason: "connect timed out", graceful: false)
                } else {
                    finish(reason: "connect timed out")
                }
                return
            }
        }
        if state == .connecting, let connection, nextAddressIndex < addresses.count, now > addressDeadline {
            // A silent address (dropped SYNs, a handshake never answered) gives way to the next
            // one at its share of the deadline, as a refused connect does at once. The sweep goes
            // on (rescheduled below) for the next address.
            connection.close(reason: "\(TLSConnection.connectFailedPrefix)no answer within its share of the connect deadline",
                             graceful: false)
        }
        if !streams.isEmpty {
            let timeout = streamTimeoutNanoseconds
            streams.forEach { streamID, stream in
                // A coarse stamp is never ahead of a precise reading taken after it; the first
                // comparison keeps the subtraction from trapping should a clock ever say otherwise.
                if now > stream.startedAt && now - stream.startedAt >= timeout { expiredScratch.append(streamID) }
            }
            if !expiredScratch.isEmpty {
                for streamID in expiredScratch {
                    // The delegate may close the connection from inside this loop.
                    guard state != .closed, let session else { break }
                    guard var stream = streams.removeValue(forKey: streamID) else { continue }
                    _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID,
                                                  NGHTTP2_CANCEL.rawValue)
                    // Answered while its request body was still going out (a server may answer
                    // before it reads the body): the answer, not a timeout.
                    let result: Result<HTTP2Response, HTTP2StreamFailure> = Self.takeAnswer(of: &stream).map { .success($0) }
                        ?? .failure(streamID > writtenStreams.highestProduced ? .refused : .timeout)
                    delegate?.connection(self, didFinishStream: stream.tag, result: result)
                }
                expiredScratch.removeAll(keepingCapacity: true)
                connection?.flush()
            }
        }
        if state != .closed { scheduleSweep() }
    }

    // MARK: - Closing

    /// Finishes every open stream with `.connectionLost(reason)` (with its answer when the whole
    /// answer arrived; `.refused` when its HEADERS were never written), frees the session and
    /// tells the delegate. Never called from inside an nghttp2 call.
    func finish(reason: String) {
        guard state != .closed else { return }
        state = .closed
        if let pendingResolution {
            HostResolver.shared.cancel(pendingResolution)
            self.pendingResolution = nil
        }
        if let sweepTimer { loop.cancel(sweepTimer) }
        sweepTimer = nil
        // With the TLS connection gone (`tlsConnection(_:didCloseWithReason:)`), its output went
        // with it: only what the socket took may have reached the server. A connection still
        // there may yet write what its output holds.
        let written = connection == nil ? writtenStreams.highest : writtenStreams.highestProduced
        connection = nil
        if let session {
            self.session = nil
            nghttp2_session_del(session)
            sessionMemory.releaseCachedBlocks()
        }
        let open = streams.removeAll().sorted { $0.0 < $1.0 }
        let delegate = self.delegate
        for (streamID, var stream) in open {
            // A stream whose whole answer arrived (its request body still going out) ends with it.
            let result: Result<HTTP2Response, HTTP2StreamFailure> = Self.takeAnswer(of: &stream).map { .success($0) }
                ?? .failure(streamID > written ? .refused : .connectionLost(reason))
            delegate?.connection(self, didFinishStream: stream.tag, result: result)
        }
        if LoggingSystem.level <= .debug {
            logger.debug("connection closed", metadata: ["host": host, "port": "\(port)", "reason": reason])
        }
        delegate?.connectionDidClose(self, reason: reason)
        self.delegate = nil
    }
}

extension HTTP2ClientConnection: TLSConnectionOwner {
    package func tlsConnectionDidCompleteHandshake(_ connection: TLSConnection) {
        do {
            let session = try HTTP2Session.makeClient(userData: Unmanaged.passUnretained(self).toOpaque(),
                                                      memory: sessionMemory)
            self.session = session
            connection.session = session
            state = .waitingForSettings
        } catch {
            connection.close(reason: "\(error)", graceful: false)
        }
    }

    package func tlsConnection(_ connection: TLSConnection, append frame: UnsafeBufferPointer<UInt8>,
                               to output: inout [UInt8]) {
        let countBefore = output.count
        guard let streamID = appendSentFrame(frame, to: &output) else { return }
        // The connection counts the output's bytes after this call returns: this frame ends
        // where its bytes, swapped as they were, end after those produced before it.
        writtenStreams.socketTook(connection.bytesWritten)
        writtenStreams.appended(streamID: streamID, endingAt: connection.bytesProduced + output.count - countBefore)
    }

    /// Appends one frame the session wrote to `output`, with the fields encoded once and the
    /// request's plain path swapped in (a HEADERS frame finds its path by its stream id).
    /// Returns the stream of a HEADERS frame (nil for any other frame).
    @discardableResult
    func appendSentFrame(_ frame: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) -> Int32? {
        var plainPath: HTTP2PlainPath?
        let headersStreamID = HTTP2FrameLayout.streamID(ofHeadersFrame: frame)
        if let streamID = headersStreamID, let slot = streams.slot(of: streamID) {
            // Taken in place: reading the field would copy the whole stream, retaining its arrays.
            plainPath = streams[slot: slot].plainPath.take()
        }
        encodedOnceSwaps.appendSwapping(frame, plainPath: plainPath, to: &output)
        return headersStreamID
    }

    package func tlsConnection(_ connection: TLSConnection, didCloseWithReason reason: String) {
        guard connection === self.connection else { return }
        writtenStreams.socketTook(connection.bytesWritten)
        self.connection = nil
        if state == .connecting && reason.hasPrefix(TLSConnection.connectFailedPrefix) && nextAddressIndex < addresses.count {
            lastConnectError = reason
            connectNextAddress()
            return
        }
        if reason == TLSConnection.sessionFinishedReason {
            if let lastProtocolError {
                finish(reason: "HTTP/2 protocol error: \(lastProtocolError)")
            } else if let goAwayErrorCode {
                finish(reason: "server sent GOAWAY (error code \(goAwayErrorCode))")
            } else {
                finish(reason: reason)
            }
            return
        }
        finish(reason: reason)
    }
}
