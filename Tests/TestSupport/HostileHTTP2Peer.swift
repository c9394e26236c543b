#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import HTTP2
import Observability

/// A hostile HTTP/2 server over TLS, written frame by frame on OpenSSL: it does what the nghttp2
/// server API cannot be made to do (invalid HPACK, DATA without end, RST_STREAM floods).
///
/// It listens on 127.0.0.1, accepts any number of connections (ALPN "h2", the given certificate),
/// reads the client's preface and frames, sends its SETTINGS and acknowledges the client's,
/// answers PINGs, keeps the client's request bodies flowing (WINDOW_UPDATE for every DATA), and
/// answers every request HEADERS with its `behaviour`. What it saw and sent is in
/// ``observations``. One thread accepts, one thread serves each connection; ``stop()`` ends and
/// joins them all.
public final class HostileHTTP2Peer: @unchecked Sendable {
    /// What the peer does with each request.
    public enum Behaviour: Sendable {
        /// Answers with a header block that is not valid HPACK.
        case invalidHPACK(InvalidHeaderBlock)
        /// Answers `:status` without END_STREAM, then sends DATA for the stream for as long as
        /// flow control allows (it honours WINDOW_UPDATE), until the client resets the stream;
        /// `ignoringResets`: goes on after the reset, held back by the connection's window only;
        /// `invalidHeaderName`: the answer also holds a field named `bad name`, which nghttp2
        /// ignores (reporting it to the error callback).
        case endlessData(status: Int, ignoringResets: Bool = false, invalidHeaderName: Bool = false)
        /// Resets the stream with the next of `codes` (in turn, per request), then sends
        /// `closedStreamFlood` more RST_STREAM frames for streams of this connection already closed.
        case resetStreams(codes: [UInt32], closedStreamFlood: Int)
        /// Answers `:status` with END_STREAM as soon as a request's HEADERS arrive, before its
        /// body, and never opens a stream's window: a body longer than the initial stream window
        /// (64 KiB) never finishes, so the client's stream stays open with its whole answer. A
        /// PING follows each answer: its ACK (``Observations/pingAcksReceived``) shows the client
        /// has read the answer, since HTTP/2 frames are processed in order.
        case answerBeforeBody(status: Int)
        /// Opens every flow-control window as wide as HTTP/2 allows, then stops reading at the
        /// first request's HEADERS (answering nothing): what the client writes fills the
        /// socket's buffers, then its own output, and later requests stay inside its session.
        case stopsReading
        /// Answers the first request of each connection with GOAWAY (NO_ERROR) whose last-stream-id
        /// is below it: nothing on the connection is processed, and nothing else is sent.
        case goAwayBeforeEveryRequest
        /// Answers the first request of each connection with GOAWAY (NO_ERROR) whose
        /// last-stream-id is that request's (it would be answered), then ends the connection
        /// without a TLS close and without the answer: a drain the network cuts short.
        case goAwayThenEndOfStream
    }

    /// Header blocks that no HPACK decoder may accept.
    public enum InvalidHeaderBlock: Sendable, CaseIterable {
        /// An indexed field (index 70) beyond the static table (61) and the empty dynamic table.
        case indexBeyondTable
        /// An indexed field whose integer says "more bytes follow" and ends.
        case truncatedInteger
        /// A literal whose Huffman-coded name ends with padding that is not the EOS prefix.
        case badHuffmanPadding

        /// The block's bytes.
        public var bytes: [UInt8] {
            switch self {
            case .indexBeyondTable: [0x80 | 70]
            case .truncatedInteger: [0xFF, 0x80]
            // Literal without indexing, new name: Huffman, 1 byte, 0x00 = '0' (00000) + padding 000.
            case .badHuffmanPadding: [0x00, 0x81, 0x00, 0x01, UInt8(ascii: "v")]
            }
        }
    }

    /// A stream of one accepted connection (connections numbered from 1 in accept order).
    public struct StreamKey: Hashable, Sendable {
        public let connection: Int
        public let stream: UInt32
    }

    /// What the peer saw and sent so far.
    public struct Observations: Sendable {
        /// TLS connections accepted (handshake done).
        public var connectionsAccepted = 0
        /// Connections that ended (the client closed, or a read failed).
        public var connectionsEnded = 0
        /// Why connections ended, when not by the peer's own `stop()` (for failure messages).
        public var endReasons: [String] = []
        /// Request HEADERS received, all connections together.
        public var headersReceived = 0
        /// RST_STREAM frames received from the client: error code by stream.
        public var resetsReceived: [StreamKey: UInt32] = [:]
        /// Error codes of the GOAWAY frames received from the client.
        public var goAwaysReceived: [UInt32] = []
        /// DATA payload bytes sent per stream.
        public var dataBytesSent: [StreamKey: Int] = [:]
        /// DATA payload bytes received, all streams together.
        public var dataBytesReceived = 0
        /// GOAWAY frames sent.
        public var goAwaysSent = 0
        /// RST_STREAM frames sent, the flood included.
        public var resetsSent = 0
        /// Bytes written to TLS, frames of every type.
        public var bytesSent = 0
        /// PING ACKs received: answers to the peer's own PINGs.
        public var pingAcksReceived = 0
    }

    /// The port the peer listens on.
    public let port: Int
    let behaviour: Behaviour
    /// SETTINGS_MAX_CONCURRENT_STREAMS the peer announces.
    let maxConcurrentStreams: UInt32
    private let context: OpaquePointer
    private let listenFD: Int32
    private let recorded = Locked(Observations())
    private let stopping = Locked(false)
    /// Sockets of connections still open, and every connection thread to join. A socket leaves
    /// the set and is closed under this lock, so `stop()` never shuts down a number reused since.
    private let live = Locked<(sockets: Set<Int32>, threads: [pthread_t])>(([], []))
    private var acceptThread: pthread_t?

    /// Starts listening on 127.0.0.1 (an ephemeral port) with `certificateFile`/`privateKeyFile`.
    public init(certificateFile: String, privateKeyFile: String, behaviour: Behaviour,
                maxConcurrentStreams: UInt32 = 100) throws {
        self.behaviour = behaviour
        self.maxConcurrentStreams = maxConcurrentStreams
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw HTTP2Error(.tlsConfiguration, "SSL_CTX_new") }
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1,
              SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            SSL_CTX_free(context)
            throw HTTP2Error(.tlsConfiguration, "cannot load the hostile peer's credentials")
        }
        SSL_CTX_set_alpn_select_cb(context, tlsSelectALPN, nil)
        self.context = context
        do {
            let address = try SocketAddress.resolve(host: "127.0.0.1", port: 0, passive: true)[0]
            listenFD = try address.listen(backlog: 16)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        _ = fcntl(listenFD, F_SETFL, fcntl(listenFD, F_GETFL, 0) & ~O_NONBLOCK)
        port = SocketAddress.localPort(of: listenFD)
        do {
            acceptThread = try ThreadStarter.start(name: "hostile-accept", detached: false) { [self] in acceptLoop() }
        } catch {
            close(listenFD)
            SSL_CTX_free(context)
            throw error
        }
    }

    /// A snapshot of what the peer saw and sent.
    public var observations: Observations { recorded.withLock { $0 } }

    /// DATA bytes sent on the streams the client reset, and on those it did not.
    public var dataBytesSentOnStreams: (reset: [Int], notReset: [Int]) {
        recorded.withLock { seen in
            var reset: [Int] = [], notReset: [Int] = []
            for (key, bytes) in seen.dataBytesSent {
                if seen.resetsReceived[key] != nil { reset.append(bytes) } else { notReset.append(bytes) }
            }
            return (reset, notReset)
        }
    }

    /// Stops accepting, ends every connection and joins every thread of the peer.
    public func stop() {
        guard let acceptThread else { return }
        self.acceptThread = nil
        stopping.withLock { $0 = true }
        shutdown(listenFD, Int32(SHUT_RDWR))
        pthread_join(acceptThread, nil)
        let threads = live.withLock { live in
            for socket in live.sockets { shutdown(socket, Int32(SHUT_RDWR)) }
            return live.threads
        }
        for thread in threads { pthread_join(thread, nil) }
        close(listenFD)
        SSL_CTX_free(context)
    }

    var isStopping: Bool { stopping.withLock { $0 } }

    func record(_ update: (inout Observations) -> Void) {
        recorded.withLock { update(&$0) }
    }

    /// Closes a connection's socket (its thread is done with it).
    func closeSocket(_ fd: Int32) {
        live.withLock {
            $0.sockets.remove(fd)
            close(fd)
        }
    }

    private func acceptLoop() {
        while !isStopping {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            guard !isStopping, let ssl = SSL_new(context) else {
                close(fd)
                return
            }
            let connection = HostileHTTP2PeerConnection(peer: self, fd: fd, ssl: ssl)
            live.withLock { _ = $0.sockets.insert(fd) }
            do {
                let thread = try ThreadStarter.start(name: "hostile-conn", detached: false) { connection.run() }
                live.withLock { $0.threads.append(thread) }
            } catch {
                SSL_free(ssl)
                closeSocket(fd)
            }
        }
    }
}
