import HTTP2
import CNGHTTP2
import Observability
import Synchronization

/// The server side of one accepted connection: TLS + an nghttp2 server session.
///
/// Thread ownership: created on the accepting loop, then everything runs on `loop`'s thread
/// (socket, `SSL*` and `nghttp2_session*` belong to it). The connection keeps itself alive while
/// open through its ``TLSConnection`` registration.
final class HTTP2ServerConnection: @unchecked Sendable {
    /// Per-stream request and response state, loop thread only.
    struct Stream {
        var method = ""
        var path = ""
        var authority = ""
        var headers: [(name: String, value: String)] = []
        /// The size of the header list so far, as SETTINGS_MAX_HEADER_LIST_SIZE counts it.
        var headerListBytes = 0
        var body: [UInt8] = []
        /// Body bytes received, kept or not.
        var bodyLength = 0
        var dispatched = false
        var responded = false
        var responseBody: [UInt8] = []
        var responseOffset = 0
        /// An answer waiting on a loop timer (``HTTP2Responder/respond(after:_:ifStreamCloses:)``).
        var delayedAnswer: DelayedAnswer?
    }

    /// An answer waiting on a loop timer: given up, and `withdrawn` told, when its stream closes
    /// first (reset by the client, or the connection gone), so a client that resets its streams
    /// leaves nothing waiting behind it.
    struct DelayedAnswer {
        let timer: EventLoopTimer
        let send: @Sendable () -> Void
        let withdrawn: @Sendable () -> Void
    }

    /// SETTINGS_MAX_HEADER_LIST_SIZE the server announces (APNs: 8000). A request whose header
    /// list grows past it (names, values and 32 bytes per field, RFC 9113 §6.5.2; trailers
    /// included) is reset (ENHANCE_YOUR_CALM) and nothing more of it is kept: HPACK lets a few
    /// bytes on the wire stand for a large dynamic table entry, repeated.
    static let maxRequestHeaderListBytes = 8000

    /// The bytes one header field counts towards SETTINGS_MAX_HEADER_LIST_SIZE.
    static func headerListSize(nameLength: Int, valueLength: Int) -> Int {
        nameLength + valueLength + 32
    }

    let loop: EventLoop
    /// What happens to a request body longer than the server keeps.
    let requestBodyLimit: HTTP2RequestBodyLimit
    /// Released when the connection closes: a handler that keeps responders (which hold the
    /// connection) would otherwise form a cycle with it.
    private var handler: HTTP2ServerHandler?
    private var observer: HTTP2ServerObserver?
    private weak var server: HTTP2Server?
    private var maxConcurrentStreams: Int
    /// False while the connection announces the server's initial limit (see
    /// ``HTTP2Server/setInitialMaxConcurrentStreams(_:)``) instead of its maximum.
    private var limitRaised: Bool
    private var connection: TLSConnection?
    var session: OpaquePointer?
    var streams: [Int32: Stream] = [:]
    /// Requests handed to the handler so far on this connection.
    private(set) var requestsReceived = 0
    /// The last stream a GOAWAY sent by ``goAwayWhenDrained(lastStreamID:)`` lets through.
    private var goAwayLastStreamID: Int32?
    /// The time the client has, from acceptance, to finish the handshake and send its preface.
    private let prefaceTimeout: Duration
    /// Closes the connection unless the client's preface arrives first; nil once it has.
    private var prefaceTimer: EventLoopTimer?
    /// `stopReadingAndWriting` was called (its suspension may still be pending).
    private var stoppingIO = false
    /// Whatever the handler keeps with this connection (loop thread only).
    var handlerState: AnyObject?
    /// When the connection last had no request being answered (from its acceptance on), in
    /// monotonic nanoseconds; 0 while one is. Written on the loop, read by the accepting loop
    /// when the server is at its connection limit and looks for the connection idle longest.
    /// A stream whose request is not complete yet does not count: a client that only starts
    /// requests cannot keep its connection from being chosen.
    let idleSince: Atomic<UInt64>
    /// Set once the server chose this connection to make room for a new one.
    let evicted = Atomic<Bool>(false)
    /// Open streams whose complete request went to the handler (loop thread only).
    private var streamsBeingAnswered = 0
    /// The verified client certificate's subject entries (short name, value), read after the
    /// handshake; nil when the client presented none.
    private(set) var clientCertificateSubject: [(name: String, value: String)]?

    /// Takes ownership of the accepted socket `fd` and `ssl`.
    init(fd: Int32, ssl: OpaquePointer, loop: EventLoop, server: HTTP2Server, handler: HTTP2ServerHandler,
         observer: HTTP2ServerObserver?, maxConcurrentStreams: Int, initialMaxConcurrentStreams: Int?,
         requestBodyLimit: HTTP2RequestBodyLimit, prefaceTimeout: Duration) {
        self.loop = loop
        self.requestBodyLimit = requestBodyLimit
        self.prefaceTimeout = prefaceTimeout
        self.idleSince = Atomic(Timestamp.monotonicNanoseconds())
        self.handler = handler
        self.observer = observer
        self.server = server
        self.maxConcurrentStreams = initialMaxConcurrentStreams ?? maxConcurrentStreams
        self.limitRaised = initialMaxConcurrentStreams == nil
        self.connection = nil
        self.connection = TLSConnection(fd: fd, ssl: ssl, loop: loop, owner: self, connecting: false)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Registers with the loop, starts the handshake and the preface deadline. Loop thread.
    func start() {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        prefaceTimer = loop.schedule(afterNanoseconds: prefaceTimeout.loopNanoseconds) { [weak self] in
            self?.prefaceDeadlinePassed()
        }
        connection?.start()
    }

    /// The client's first SETTINGS frame arrived (the end of its connection preface): the
    /// connection may now stay open as long as the client keeps it. Loop thread.
    func clientPrefaceReceived() {
        cancelPrefaceDeadline()
    }

    /// Stops the preface deadline (the preface came, or the connection closed). Loop thread.
    private func cancelPrefaceDeadline() {
        guard let prefaceTimer else { return }
        self.prefaceTimer = nil
        loop.cancel(prefaceTimer)
    }

    /// Closes a connection whose client has not finished its handshake and preface in time.
    private func prefaceDeadlinePassed() {
        guard prefaceTimer != nil else { return }
        prefaceTimer = nil
        connection?.close(reason: "no TLS handshake and HTTP/2 preface within \(prefaceTimeout)", graceful: false)
    }

    /// The server's maximum changed: announced at once unless the connection is still held at
    /// the initial limit. Loop thread.
    func serverMaximumDidChange(_ value: Int) {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard limitRaised else { return }
        updateMaxConcurrentStreams(value)
    }

    /// Raises a connection held at the initial limit to the server's maximum (once). Loop thread.
    func raiseConcurrentStreamLimit() {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard !limitRaised, let server else { return }
        limitRaised = true
        updateMaxConcurrentStreams(server.maxConcurrentStreams)
    }

    /// Sends GOAWAY (NO_ERROR) naming `lastStreamID` as the last stream processed: streams up to
    /// it are still answered, later ones are never handed to the handler (nghttp2 closes them as
    /// refused once the GOAWAY is out), and the connection closes when drained. Loop thread.
    func goAwayWhenDrained(lastStreamID: Int32) {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard let session, let connection, goAwayLastStreamID == nil else { return }
        goAwayLastStreamID = lastStreamID
        _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, NGHTTP2_NO_ERROR.rawValue, nil, 0)
        connection.scheduleFlush()
    }

    /// Closes the connection to make room for a new one (the server chose it as idle longest):
    /// with GOAWAY at once when no whole request is open, or else with a GOAWAY that lets the
    /// requests received so far be answered (and answers given be written out) first, for at
    /// most ``drainTimeout``: a client that never takes its answers cannot keep the slot. Loop thread.
    func closeToMakeRoom() {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard let session, streams.values.contains(where: \.dispatched) else {
            close()
            return
        }
        goAwayWhenDrained(lastStreamID: nghttp2_session_get_last_proc_stream_id(session))
        _ = loop.schedule(afterNanoseconds: Self.drainTimeout.loopNanoseconds) { [weak self] in
            self?.close()  // still draining (closed connections ignore it)
        }
    }

    /// How long a connection closed to make room may take to answer and write out what it has.
    static let drainTimeout: Duration = .seconds(10)

    /// Closes the socket at once, without GOAWAY: open streams are lost. Loop thread.
    func drop() {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        connection?.close(reason: "dropped by the server", graceful: false)
    }

    /// Stops reading and writing; TCP stays open until the server or the client closes (what the
    /// client sends meanwhile is thrown away, its close is still seen). Called from a
    /// handler, i.e. inside nghttp2's receive callbacks: the suspension waits until the current
    /// read is over, so answers already given to earlier streams of that read are written
    /// first. `suspended` runs once, after the suspension. Loop thread.
    func stopReadingAndWriting(suspended: @escaping @Sendable () -> Void = {}) {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard !stoppingIO else { return }
        stoppingIO = true
        loop.execute { [weak self] in
            guard let connection = self?.connection else { return }
            connection.flush()
            connection.suspendIO()
            suspended()
        }
    }

    /// Announces a new SETTINGS_MAX_CONCURRENT_STREAMS. Loop thread.
    private func updateMaxConcurrentStreams(_ value: Int) {
        maxConcurrentStreams = value
        guard let session, let connection else { return }
        do {
            try HTTP2Session.submitSettings(session, [(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, UInt32(clamping: value))])
            connection.flush()
        } catch {
            connection.close(reason: "\(error)", graceful: false)
        }
    }

    /// Sends GOAWAY and closes the connection. Loop thread.
    func close() {
        guard let connection else { return }
        if let session { _ = nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue) }
        connection.close(reason: "server closed the connection", graceful: true)
    }

    /// Submits the response of `streamID` if the stream is still open and unanswered. Loop thread.
    func respond(streamID: Int32, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        guard let session, let connection, let index = streams.index(forKey: streamID),
              !streams.values[index].responded else { return }
        streams.values[index].responded = true
        if streams.values[index].dispatched { answerGiven() }
        streams.values[index].responseBody = body
        let statusText = String(status)
        var byteCapacity = HeaderBlock.size(statusText)
        for header in headers { byteCapacity += HeaderBlock.size(header.name) + HeaderBlock.size(header.value) }
        let result = HeaderBlock.with(fieldCount: 1 + headers.count, byteCapacity: byteCapacity) { block in
            block.add(":status", statusText)
            for header in headers { block.add(copyingName: header.name, header.value) }
            if body.isEmpty {
                return nghttp2_submit_response(session, streamID, block.nameValues, block.count, nil)
            }
            var provider = nghttp2_data_provider()
            provider.read_callback = serverReadResponseBody
            return nghttp2_submit_response(session, streamID, block.nameValues, block.count, &provider)
        }
        if result != 0 {
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID,
                                          NGHTTP2_INTERNAL_ERROR.rawValue)
        }
        connection.scheduleFlush()
    }

    /// Forgets a request stream and resets it with `errorCode`; its remaining frames are
    /// ignored. Loop thread (inside nghttp2's callbacks, which send the reset afterwards).
    func resetStream(_ streamID: Int32, errorCode: nghttp2_error_code) {
        forgetStream(streamID)
        guard let session else { return }
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode.rawValue)
    }

    /// Forgets a stream that closed or was reset; an answer still waiting for it is withdrawn.
    /// Loop thread.
    func forgetStream(_ streamID: Int32) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        if stream.dispatched && !stream.responded { answerGiven() }
        withdraw(stream.delayedAnswer)
    }

    /// A dispatched request was answered (or its stream closed first): once none is left, the
    /// connection is idle, whether or not the client has taken the answers. One that never lets
    /// them out (a zero flow-control window, or no reading) can so be chosen to make room, and
    /// cannot hold its connection against the limit for ever.
    private func answerGiven() {
        streamsBeingAnswered -= 1
        if streamsBeingAnswered == 0 { idleSince.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed) }
    }

    private func withdraw(_ delayedAnswer: DelayedAnswer?) {
        guard let delayedAnswer else { return }
        loop.cancel(delayedAnswer.timer)
        delayedAnswer.withdrawn()
    }

    /// Runs `send` after `nanoseconds` unless stream `streamID` closes first, in which case
    /// `withdrawn` runs instead (at once when the stream is already gone or has an answer
    /// waiting). Loop thread.
    func delayAnswer(streamID: Int32, nanoseconds: UInt64, send: @escaping @Sendable () -> Void,
                     withdrawn: @escaping @Sendable () -> Void) {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard let index = streams.index(forKey: streamID), streams.values[index].delayedAnswer == nil else {
            withdrawn()
            return
        }
        let timer = loop.schedule(afterNanoseconds: nanoseconds) { [weak self] in
            self?.delayedAnswerDue(streamID: streamID)
        }
        streams.values[index].delayedAnswer = DelayedAnswer(timer: timer, send: send, withdrawn: withdrawn)
    }

    private func delayedAnswerDue(streamID: Int32) {
        guard let index = streams.index(forKey: streamID),
              let delayedAnswer = streams.values[index].delayedAnswer else { return }
        streams.values[index].delayedAnswer = nil
        delayedAnswer.send()
    }

    /// A request stream began (its HEADERS arrived). Loop thread.
    func streamOpened() {
        observer?.serverConnection(self, didOpenStreamWithOpenCount: streams.count)
    }

    /// A PING arrived (nghttp2 answers it), or the acknowledgement of one of ours. Loop thread.
    func pingReceived(acknowledgement: Bool) {
        if acknowledgement {
            observer?.serverConnectionDidReceivePingAcknowledgement(self)
        } else {
            observer?.serverConnectionDidReceivePing(self)
        }
    }

    /// The client acknowledged a SETTINGS frame. Loop thread.
    func settingsAcknowledged() {
        observer?.serverConnectionDidReceiveSettingsAcknowledgement(self)
    }

    /// Queues `count` PING frames (a flood, for hostile-peer tests). Loop thread.
    func sendPings(_ count: Int) {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard let session, let connection else { return }
        for _ in 0..<count { _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) }
        connection.scheduleFlush()
    }

    /// Queues `count` SETTINGS frames repeating the current limit (a flood). Loop thread.
    func sendSettings(_ count: Int) {
        precondition(loop.inEventLoop, "HTTP2ServerConnection is confined to its loop")
        guard let session, let connection else { return }
        let value = UInt32(clamping: maxConcurrentStreams)
        for _ in 0..<count {
            guard (try? HTTP2Session.submitSettings(session, [(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, value)])) != nil else { break }
        }
        connection.scheduleFlush()
    }

    /// Hands a complete request to the handler.
    func dispatch(streamID: Int32) {
        guard let index = streams.index(forKey: streamID), !streams.values[index].dispatched else { return }
        if let goAwayLastStreamID, streamID > goAwayLastStreamID { return }
        streams.values[index].dispatched = true
        streamsBeingAnswered += 1
        if streamsBeingAnswered == 1 { idleSince.store(0, ordering: .relaxed) }
        let stream = streams.values[index]
        let request = HTTP2ServerRequest(method: stream.method, path: stream.path, authority: stream.authority,
                                         headers: stream.headers, body: stream.body, bodyLength: stream.bodyLength)
        streams.values[index].headers = []  // the request now holds the only reference
        streams.values[index].body = []
        requestsReceived += 1
        handler?.handle(request, responder: HTTP2Responder(connection: self, streamID: streamID))
    }
}

extension HTTP2ServerConnection: TLSConnectionOwner {
    func tlsConnectionDidCompleteHandshake(_ connection: TLSConnection) {
        do {
            let session = try HTTP2Session.makeServer(userData: Unmanaged.passUnretained(self).toOpaque(),
                                                      maxConcurrentStreams: maxConcurrentStreams)
            self.session = session
            connection.session = session
            if let ssl = connection.sslHandle { clientCertificateSubject = ClientCertificate.subject(of: ssl) }
            observer?.serverConnectionDidOpen(self)
        } catch {
            connection.close(reason: "\(error)", graceful: false)
        }
    }

    func tlsConnection(_ connection: TLSConnection, didCloseWithReason reason: String) {
        self.connection = nil
        cancelPrefaceDeadline()
        if let session {
            self.session = nil
            nghttp2_session_del(session)
        }
        let closedStreams = streams
        streams = [:]
        for stream in closedStreams.values { withdraw(stream.delayedAnswer) }
        handlerState = nil
        handler = nil
        observer = nil
        server?.connectionDidClose(self)
    }
}
