#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// One connection of a ``HostileHTTP2Peer``, served by its own thread on a blocking socket: a
/// small frame reader (9-byte header: length, type, flags, stream id) and the peer's behaviour.
/// Everything here belongs to that thread; what it saw goes to the peer's observations.
final class HostileHTTP2PeerConnection: @unchecked Sendable {
    private enum FrameType: UInt8 {
        case data = 0x0, headers = 0x1, rstStream = 0x3, settings = 0x4, ping = 0x6, goAway = 0x7
        case windowUpdate = 0x8, continuation = 0x9
    }

    private static let flagEndStream: UInt8 = 0x1
    private static let flagAck: UInt8 = 0x1
    private static let flagEndHeaders: UInt8 = 0x4
    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private let peer: HostileHTTP2Peer
    private let fd: Int32
    private let ssl: OpaquePointer
    private var number = 0
    private var input: [UInt8] = []
    private var prefaceSeen = false
    private var open = true
    /// False once the peer stops reading (``HostileHTTP2Peer/Behaviour/stopsReading``).
    private var reading = true
    /// Sends nothing more (the connection is broken on purpose and the client is expected to close it).
    private var quiet = false
    /// HEADERS of this stream arrived without END_HEADERS: its CONTINUATION frames follow.
    private var headersPendingStream: UInt32?
    private var requestsAnswered = 0
    private var bytesRead = 0
    private var closedStreams: [UInt32] = []
    // Flow control of what this peer sends (the client's receive windows).
    private var initialStreamWindow = 65_535
    private var connectionWindow = 65_535
    private var maxFrameSize = 16_384
    /// Streams sending endless DATA, in order, with their windows.
    private var streaming: [(stream: UInt32, window: Int)] = []

    init(peer: HostileHTTP2Peer, fd: Int32, ssl: OpaquePointer) {
        self.peer = peer
        self.fd = fd
        self.ssl = ssl
    }

    func run() {
        defer {
            SSL_free(ssl)
            peer.closeSocket(fd)
        }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        SSL_set_fd(ssl, fd)
        _ = SSL_ctrl(ssl, SSL_CTRL_MODE, Int(SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)
        guard SSL_accept(ssl) == 1 else { return }
        peer.record {
            $0.connectionsAccepted += 1
            number = $0.connectionsAccepted
        }
        defer { peer.record { $0.connectionsEnded += 1 } }
        // SETTINGS_MAX_CONCURRENT_STREAMS (3).
        var settings: [UInt8] = [0, 3]
        settings.appendBigEndian(peer.maxConcurrentStreams)
        if case .stopsReading = peer.behaviour {
            // SETTINGS_INITIAL_WINDOW_SIZE (4), and the connection window, at 2^31 - 1.
            settings += [0, 4]
            settings.appendBigEndian(UInt32(Int32.max))
            var increment: [UInt8] = []
            increment.appendBigEndian(UInt32(Int32.max) - 65_535)
            send(frame(.settings, flags: 0, stream: 0, payload: settings) + frame(.windowUpdate, flags: 0, stream: 0, payload: increment))
        } else {
            send(frame(.settings, flags: 0, stream: 0, payload: settings))
        }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while open, !peer.isStopping {
            if !reading {
                _ = poll(nil, 0, 20)  // until the peer stops
                continue
            }
            if sendSomeData() {
                if SSL_pending(ssl) == 0 && !isReadable(waitMilliseconds: 0) { continue }
            } else if SSL_pending(ssl) == 0 && !isReadable(waitMilliseconds: 50) {
                continue
            }
            let count = SSL_read(ssl, &buffer, Int32(buffer.count))
            if count <= 0 {
                let error = SSL_get_error(ssl, count)
                if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { continue }
                let detail = "SSL_read: SSL error \(error), errno \(errno), \(String(cString: ERR_error_string(ERR_get_error(), nil))), read \(bytesRead)"
                peer.record { $0.endReasons.append(detail) }
                return
            }
            input.append(contentsOf: buffer[0..<Int(count)])
            bytesRead += Int(count)
            readFrames()
        }
    }

    private func isReadable(waitMilliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, waitMilliseconds) > 0
    }

    // MARK: - Reading

    private func readFrames() {
        if !prefaceSeen {
            guard input.count >= Self.preface.count else { return }
            guard input.starts(with: Self.preface) else {
                peer.record { $0.endReasons.append("no client preface") }
                open = false
                return
            }
            input.removeFirst(Self.preface.count)
            prefaceSeen = true
        }
        var offset = 0
        while open, reading, input.count - offset >= 9 {
            let length = Int(input[offset]) << 16 | Int(input[offset + 1]) << 8 | Int(input[offset + 2])
            guard input.count - offset >= 9 + length else { break }
            let type = input[offset + 3], flags = input[offset + 4]
            let stream = input.bigEndianUInt32(at: offset + 5) & 0x7FFF_FFFF
            let payload = Array(input[(offset + 9)..<(offset + 9 + length)])
            offset += 9 + length
            if let known = FrameType(rawValue: type) {
                received(known, flags: flags, stream: stream, payload: payload)
            }
        }
        input.removeFirst(offset)
    }

    private func received(_ type: FrameType, flags: UInt8, stream: UInt32, payload: [UInt8]) {
        switch type {
        case .settings:
            guard flags & Self.flagAck == 0 else { return }
            applySettings(payload)
            send(frame(.settings, flags: Self.flagAck, stream: 0, payload: []))
        case .ping:
            guard flags & Self.flagAck == 0 else {
                peer.record { $0.pingAcksReceived += 1 }
                return
            }
            send(frame(.ping, flags: Self.flagAck, stream: 0, payload: payload))
        case .windowUpdate where payload.count == 4:
            let increment = Int(payload.bigEndianUInt32(at: 0) & 0x7FFF_FFFF)
            if stream == 0 {
                connectionWindow += increment
            } else if let index = streaming.firstIndex(where: { $0.stream == stream }) {
                streaming[index].window += increment
            }
        case .data where !payload.isEmpty:
            peer.record { $0.dataBytesReceived += payload.count }
            // Keep the request bodies flowing: give back what the client used of our window.
            var increment: [UInt8] = []
            increment.appendBigEndian(UInt32(payload.count))
            send(frame(.windowUpdate, flags: 0, stream: 0, payload: increment))
        case .rstStream where payload.count == 4:
            let code = payload.bigEndianUInt32(at: 0)
            if case .endlessData(_, ignoringResets: true, _) = peer.behaviour,
               let index = streaming.firstIndex(where: { $0.stream == stream }) {
                streaming[index].window = .max  // the client will never grant it more: ignore that too
            } else {
                streaming.removeAll { $0.stream == stream }
            }
            peer.record { $0.resetsReceived[.init(connection: number, stream: stream)] = code }
        case .goAway where payload.count >= 8:
            let code = payload.bigEndianUInt32(at: 4)
            peer.record { $0.goAwaysReceived.append(code) }
        case .headers:
            if flags & Self.flagEndHeaders != 0 {
                answer(stream: stream)
            } else {
                headersPendingStream = stream
            }
        case .continuation where flags & Self.flagEndHeaders != 0:
            if let pending = headersPendingStream {
                headersPendingStream = nil
                answer(stream: pending)
            }
        default:
            break
        }
    }

    private func applySettings(_ payload: [UInt8]) {
        var index = 0
        while index + 6 <= payload.count {
            let identifier = UInt16(payload[index]) << 8 | UInt16(payload[index + 1])
            let value = Int(payload.bigEndianUInt32(at: index + 2))
            switch identifier {
            case 4:  // SETTINGS_INITIAL_WINDOW_SIZE: applies to open streams too.
                let delta = value - initialStreamWindow
                initialStreamWindow = value
                for position in streaming.indices { streaming[position].window += delta }
            case 5:  // SETTINGS_MAX_FRAME_SIZE
                maxFrameSize = value
            default:
                break
            }
            index += 6
        }
    }

    // MARK: - The behaviour

    private func answer(stream: UInt32) {
        peer.record { $0.headersReceived += 1 }
        let request = requestsAnswered
        requestsAnswered += 1
        switch peer.behaviour {
        case .invalidHPACK(let block):
            send(frame(.headers, flags: Self.flagEndHeaders | Self.flagEndStream, stream: stream, payload: block.bytes))
            // Then only listen: anything sent after the client has closed would make its kernel
            // answer with a TCP reset, which can discard its GOAWAY before this thread reads it.
            quiet = true
        case .endlessData(let status, _, let invalidHeaderName):
            // A literal field without indexing, new name: `bad name: x`.
            let invalidField: [UInt8] = invalidHeaderName ? [0x00, 8] + Array("bad name".utf8) + [1, UInt8(ascii: "x")] : []
            send(frame(.headers, flags: Self.flagEndHeaders, stream: stream, payload: Self.statusBlock(status) + invalidField))
            streaming.append((stream, initialStreamWindow))
        case .stopsReading:
            reading = false
        case .answerBeforeBody(let status):
            send(frame(.headers, flags: Self.flagEndHeaders | Self.flagEndStream, stream: stream, payload: Self.statusBlock(status))
                 + frame(.ping, flags: 0, stream: 0, payload: [UInt8](repeating: 0, count: 8)))
        case .resetStreams(let codes, let flood):
            var code: [UInt8] = []
            code.appendBigEndian(codes.isEmpty ? 2 : codes[request % codes.count])
            var frames = frame(.rstStream, flags: 0, stream: stream, payload: code)
            closedStreams.append(stream)
            for index in 0..<flood {
                frames += frame(.rstStream, flags: 0, stream: closedStreams[index % closedStreams.count], payload: code)
            }
            // Counted before they go: once the client has them, a test may read the count.
            peer.record { $0.resetsSent += 1 + flood }
            send(frames)
        case .goAwayBeforeEveryRequest:
            guard request == 0 else { return }
            var payload: [UInt8] = []
            payload.appendBigEndian(stream >= 2 ? stream - 2 : 0)
            payload.appendBigEndian(0)  // NO_ERROR
            peer.record { $0.goAwaysSent += 1 }  // counted before it goes, as above
            send(frame(.goAway, flags: 0, stream: 0, payload: payload))
        case .goAwayThenEndOfStream:
            guard request == 0 else { return }
            var payload: [UInt8] = []
            payload.appendBigEndian(stream)
            payload.appendBigEndian(0)  // NO_ERROR
            peer.record { $0.goAwaysSent += 1 }
            send(frame(.goAway, flags: 0, stream: 0, payload: payload))
            // The end of the stream after it, with no TLS close_notify; then only listen, until
            // the client closes.
            shutdown(fd, Int32(SHUT_WR))
            quiet = true
        }
    }

    /// `:status` from HPACK's static table (indexed field), or a literal with indexed name 8.
    private static func statusBlock(_ status: Int) -> [UInt8] {
        switch status {
        case 200: return [0x88]
        case 204: return [0x89]
        case 206: return [0x8A]
        case 304: return [0x8B]
        case 400: return [0x8C]
        case 404: return [0x8D]
        case 500: return [0x8E]
        default:
            let digits = Array(String(status).utf8)
            return [0x08, UInt8(digits.count)] + digits
        }
    }

    /// Sends one DATA frame on the first streaming stream that has window. Returns whether it did.
    private func sendSomeData() -> Bool {
        guard connectionWindow > 0,
              let index = streaming.firstIndex(where: { $0.window > 0 }) else { return false }
        let (stream, window) = streaming[index]
        let length = min(maxFrameSize, window, connectionWindow)
        connectionWindow -= length
        streaming[index].window -= length
        // Round-robin: the stream goes to the back of the line.
        streaming.append(streaming.remove(at: index))
        send(frame(.data, flags: 0, stream: stream, payload: [UInt8](repeating: UInt8(ascii: "x"), count: length)))
        peer.record { $0.dataBytesSent[.init(connection: number, stream: stream), default: 0] += length }
        return true
    }

    // MARK: - Writing

    private func frame(_ type: FrameType, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(payload.count >> 16 & 0xFF), UInt8(payload.count >> 8 & 0xFF),
                              UInt8(payload.count & 0xFF), type.rawValue, flags]
        bytes.appendBigEndian(stream)
        return bytes + payload
    }

    /// Writes `bytes` whole (retrying after a send timeout); a failed write ends the connection.
    private func send(_ bytes: [UInt8]) {
        guard open, !quiet, !bytes.isEmpty else { return }
        while !peer.isStopping {
            let written = SSL_write(ssl, bytes, Int32(bytes.count))
            if written > 0 {
                peer.record { $0.bytesSent += Int(written) }
                return
            }
            let error = SSL_get_error(ssl, written)
            if error != SSL_ERROR_WANT_WRITE && error != SSL_ERROR_WANT_READ {
                let detail = "SSL_write: SSL error \(error), errno \(errno)"
                peer.record { $0.endReasons.append(detail) }
                break
            }
        }
        open = false
    }
}

extension [UInt8] {
    fileprivate mutating func appendBigEndian(_ value: UInt32) {
        append(contentsOf: [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)])
    }

    fileprivate func bigEndianUInt32(at index: Int) -> UInt32 {
        UInt32(self[index]) << 24 | UInt32(self[index + 1]) << 16 | UInt32(self[index + 2]) << 8 | UInt32(self[index + 3])
    }
}
