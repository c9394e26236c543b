#if canImport(Glibc)
import Glibc
#endif

/// One accepted connection of an ``HTTP1Server``: reads a request head, answers it, and either
/// waits for the next one (keep-alive) or closes.
///
/// Thread ownership: everything runs on the server's loop. One deadline timer at a time bounds
/// each phase (head, idle, write, linger), so no client can hold the connection open by being slow.
/// `@unchecked Sendable` only so its timers can capture it: every method checks the loop thread.
final class HTTP1ServerConnection: EventLoopIOHandler, @unchecked Sendable {
    private enum Phase {
        /// Waiting for (the rest of) a request head.
        case readingHead
        /// Writing an answer; reading pauses until it is out.
        case writing
        /// The final answer is out and our side is shut: discarding what the client still sends,
        /// so closing does not reset the connection before the client read the answer.
        case lingering
        case closed
    }

    private let fd: Int32
    private unowned let server: HTTP1Server
    private let loop: EventLoop
    private var phase = Phase.readingHead
    private var input: [UInt8] = []
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var closeAfterWrite = false
    private var deadline: EventLoopTimer?
    /// Whether `deadline` bounds a request head (else the idle wait between requests).
    private var deadlineIsForHead = true
    /// The client shut its sending side (end of stream read): what it sent is answered, then
    /// the connection closes.
    private var peerFinished = false
    private static let lingerTime: Duration = .seconds(2)
    /// While the connection waits for a request head (idle between requests, silent since it
    /// connected, or with part of a head received, also one pipelined behind an answer) or
    /// lingers after its last answer: the server's order of such waits, so that at its
    /// connection limit the longest-waiting one can make room, and clients that trickle heads or
    /// never close cannot hold every slot. Nil while a request is answered.
    private(set) var waitingSince: UInt64?

    init(fd: Int32, server: HTTP1Server) {
        self.fd = fd
        self.server = server
        self.loop = server.loop
    }

    /// Arms the deadline for the first request head.
    func start() {
        loop.preconditionInEventLoop()
        waitingSince = server.nextWaitOrder()
        arm(server.limits.headTimeout)
    }

    package func eventLoopReadable() {
        loop.preconditionInEventLoop()
        switch phase {
        case .readingHead:
            let hadInput = !input.isEmpty
            guard readAvailable(keep: true) else { return }
            if !hadInput && !input.isEmpty && !deadlineIsForHead {
                // The first byte after an idle keep-alive wait: now the head deadline runs.
                arm(server.limits.headTimeout)
            }
            processInput()
            // Half-closed with no complete request left to answer: nothing more can come.
            if peerFinished, case .readingHead = phase { close() }
        case .lingering:
            _ = readAvailable(keep: false)
        case .writing, .closed:
            return
        }
    }

    package func eventLoopWritable() {
        loop.preconditionInEventLoop()
        guard case .writing = phase else { return }
        flushOutput()
        processInput()  // requests that came pipelined behind the one just answered
    }

    /// Reads what the socket has. Returns false when the connection closed meanwhile.
    /// - Parameter keep: append to `input` (at most a little beyond the head limit), or discard.
    private func readAvailable(keep: Bool) -> Bool {
        let buffer = loop.readBuffer
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count > 0 {
                if keep {
                    input.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                    // Enough to decide: the parser refuses a head over the limit.
                    if input.count > server.limits.maxHeadBytes { return true }
                }
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return true }
            if count == 0 && keep {
                // End of stream: the client may have sent its request and shut its side
                // (`shutdown(SHUT_WR)`); answer what arrived. Not readable any more: EOF would
                // be reported on every wait.
                peerFinished = true
                loop.setInterest(fd: fd, [])
                return true
            }
            close()  // end of stream or a socket error
            return false
        }
    }

    /// Answers the complete requests in `input`, one after the other while each answer is
    /// written at once (pipelined requests), in a loop: a burst of thousands of small requests
    /// in one read never nests calls.
    private func processInput() {
        while case .readingHead = phase, !input.isEmpty {
            switch HTTP1RequestParser.parse(input[...], maxHeadBytes: server.limits.maxHeadBytes) {
            case .incomplete:
                return
            case .refused(let status, let message):
                input.removeAll()
                respond(HTTP1Response.text(status, message), includeBody: true, keepAlive: false)
            case .request(let request, let consumed):
                input.removeFirst(consumed)
                // After the client's end of stream, the connection is kept only for what it
                // sent behind this request (the loop answers it, or closes on a part of a head).
                let keepAlive = request.keepsAlive && (!peerFinished || !input.isEmpty)
                guard request.method == "GET" || request.method == "HEAD" else {
                    let response = HTTP1Response.text(405, "only GET and HEAD are served", headers: [("Allow", "GET, HEAD")])
                    respond(response, includeBody: true, keepAlive: keepAlive)
                    continue
                }
                respond(server.handler(request), includeBody: request.method != "HEAD", keepAlive: keepAlive)
            }
        }
    }

    private func respond(_ response: HTTP1Response, includeBody: Bool, keepAlive: Bool) {
        phase = .writing
        waitingSince = nil
        output = response.serialized(includeBody: includeBody, keepAlive: keepAlive)
        outputOffset = 0
        closeAfterWrite = !keepAlive
        arm(server.limits.writeTimeout)
        flushOutput()
    }

    private func flushOutput() {
        while outputOffset < output.count {
            let count = output.withUnsafeBytes { bytes in
                send(fd, bytes.baseAddress! + outputOffset, bytes.count - outputOffset, Int32(MSG_NOSIGNAL))  // invariant: non-empty
            }
            if count > 0 {
                outputOffset += count
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                loop.setInterest(fd: fd, .writable)
                return
            }
            close()
            return
        }
        output.removeAll(keepingCapacity: true)
        if closeAfterWrite {
            phase = .lingering
            waitingSince = server.nextWaitOrder()  // nothing more is answered: it may make room
            shutdown(fd, Int32(SHUT_WR))
            loop.setInterest(fd: fd, .readable)
            arm(Self.lingerTime)
            return
        }
        phase = .readingHead
        loop.setInterest(fd: fd, .readable)
        waitingSince = server.nextWaitOrder()
        // A pipelined request already here is answered by the caller's loop (`processInput`).
        arm(input.isEmpty ? server.limits.idleTimeout : server.limits.headTimeout, forHead: !input.isEmpty)
    }

    private func arm(_ duration: Duration, forHead: Bool = true) {
        if let deadline { loop.cancel(deadline) }
        deadlineIsForHead = forHead
        let (seconds, attoseconds) = duration.components
        let nanoseconds = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
        deadline = loop.schedule(afterNanoseconds: nanoseconds) { [self] in deadlinePassed() }
    }

    private func deadlinePassed() {
        loop.preconditionInEventLoop()
        deadline = nil
        switch phase {
        case .readingHead where !input.isEmpty || deadlineIsForHead:
            input.removeAll()
            respond(HTTP1Response.text(408, "request head not received in time"), includeBody: true, keepAlive: false)
        case .readingHead, .writing, .lingering:
            close()
        case .closed:
            return
        }
    }

    /// Closes the socket and forgets the connection. Idempotent.
    func close() {
        loop.preconditionInEventLoop()
        if case .closed = phase { return }
        phase = .closed
        if let deadline { loop.cancel(deadline) }
        deadline = nil
        loop.unregister(fd: fd)
        Glibc.close(fd)
        server.connectionDidClose(self)
    }
}
