import CNGHTTP2
import Observability

// nghttp2 callbacks of the client session. Each is a plain C function; `userData` is the
// HTTP2ClientConnection (unretained). They run on the loop thread, inside
// nghttp2_session_mem_recv / mem_send.

/// Runs `body` with the session's connection, borrowed rather than retained (a retain and a
/// release, both atomic, per callback: several per stream). Safe because nghttp2 calls back only
/// from inside `nghttp2_session_mem_recv` and `mem_send`, and those are called by the connection's
/// `TLSConnection`, which holds its owner strongly until its teardown and never tears down inside
/// such a call (it defers the close), or by the connection itself (in memory, for tests).
@inline(__always)
private func withClientConnection<Result>(_ userData: UnsafeMutableRawPointer?,
                                          _ body: (HTTP2ClientConnection) -> Result) -> Result {
    // invariant: every client session is created with its connection as user data.
    Unmanaged<HTTP2ClientConnection>.fromOpaque(userData!)._withUnsafeGuaranteedRef(body)
}

/// Called for each response header field (after HPACK decoding and validation).
func clientOnHeader(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                    _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
                    _ value: UnsafePointer<UInt8>?, _ valueLength: Int,
                    _ flags: UInt8, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, let name, let value else { return 0 }
    withClientConnection(userData) { connection in
        connection.receivedHeader(streamID: frame.pointee.hd.stream_id,
                                  name: UnsafeBufferPointer(start: name, count: nameLength),
                                  value: UnsafeBufferPointer(start: value, count: valueLength))
    }
    return 0
}

/// Called for each chunk of a response body.
func clientOnDataChunk(_ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32,
                       _ data: UnsafePointer<UInt8>?, _ length: Int,
                       _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let data else { return 0 }
    withClientConnection(userData) { $0.receivedData(streamID: streamID, UnsafeBufferPointer(start: data, count: length)) }
    return 0
}

/// Called when a whole frame was received (SETTINGS, GOAWAY, end of a response…).
func clientOnFrame(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                   _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    withClientConnection(userData) { $0.receivedFrame(frame) }
    return 0
}

/// Called when a stream closed, for any reason: the stream's final event.
func clientOnStreamClose(_ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32,
                         _ userData: UnsafeMutableRawPointer?) -> Int32 {
    withClientConnection(userData) { $0.streamClosed(streamID: streamID, errorCode: errorCode) }
    return 0
}

/// Called when nghttp2 detects a protocol violation by the peer: remembered as the close reason
/// when it ends the session. A response's header field nghttp2 ignores or that resets only its
/// stream (`NGHTTP2_ERR_HTTP_HEADER`, `NGHTTP2_ERR_HTTP_MESSAGING`) leaves the connection as it
/// was, and is not kept: the stream's own failure says what happened to it.
func clientOnError(_ session: OpaquePointer?, _ libraryErrorCode: Int32, _ message: UnsafePointer<CChar>?,
                   _ length: Int, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let message, libraryErrorCode != NGHTTP2_ERR_HTTP_HEADER.rawValue,
          libraryErrorCode != NGHTTP2_ERR_HTTP_MESSAGING.rawValue else { return 0 }
    let text = UnsafeRawBufferPointer(start: message, count: length)
    withClientConnection(userData) { $0.lastProtocolError = String(decoding: text, as: UTF8.self) }
    return 0
}

/// Called after a frame was serialized. A GOAWAY with an error code means nghttp2 terminated
/// the session because of the peer: its text becomes the close reason.
func clientOnFrameSend(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                       _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    if UInt32(frame.pointee.hd.type) == NGHTTP2_WINDOW_UPDATE.rawValue && frame.pointee.hd.stream_id == 0 {
        withClientConnection(userData) {
            $0.sentConnectionWindowUpdate(increment: Int(frame.pointee.window_update.window_size_increment))
        }
        return 0
    }
    guard UInt32(frame.pointee.hd.type) == NGHTTP2_GOAWAY.rawValue else { return 0 }
    let goAway = frame.pointee.goaway
    guard goAway.error_code != NGHTTP2_NO_ERROR.rawValue else { return 0 }
    var text = String(cString: nghttp2_http2_strerror(goAway.error_code))
    if let data = goAway.opaque_data, goAway.opaque_data_len > 0 {
        text += ": " + String(decoding: UnsafeBufferPointer(start: data, count: goAway.opaque_data_len), as: UTF8.self)
    }
    withClientConnection(userData) { $0.lastProtocolError = $0.lastProtocolError ?? text }
    return 0
}

/// The request body's data source: copies the next bytes of the stream's `[UInt8]`.
func clientReadRequestBody(_ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?,
                           _ length: Int, _ dataFlags: UnsafeMutablePointer<UInt32>?,
                           _ source: UnsafeMutablePointer<nghttp2_data_source>?,
                           _ userData: UnsafeMutableRawPointer?) -> Int {
    guard let buffer, let dataFlags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    return withClientConnection(userData) {
        $0.readRequestBody(streamID: streamID, into: buffer, length: length, flags: dataFlags)
    }
}

extension HTTP2ClientConnection {
    /// A `:status` value's code: three ASCII digits (nghttp2's own checks refuse anything else
    /// before this runs), 0 for anything else, so that no value can overflow the arithmetic.
    static func statusCode(_ value: UnsafeBufferPointer<UInt8>) -> Int {
        guard value.count == 3 else { return 0 }
        var status = 0
        for byte in value {
            let digit = byte &- UInt8(ascii: "0")
            guard digit <= 9 else { return 0 }
            status = status * 10 + Int(digit)
        }
        return status
    }

    func receivedHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let index = streams.slot(of: streamID) else { return }
        if name.first == UInt8(ascii: ":") {
            if ByteScan.equals(name, ":status") {
                streams[slot: index].status = Self.statusCode(value)
            }
            return
        }
        Self.keepHeader(name: name, value: value, in: &streams[slot: index], spare: &spareHeaders,
                        expectedNames: expectedResponseHeaderNames)
    }

    /// Adds a response header to `stream`, in place (reading a field through `streams.values[i]`
    /// would copy the whole stream, retaining and releasing its arrays). Bounded: a peer sending
    /// endless headers cannot grow memory (`maxResponseHeader…`).
    private static func keepHeader(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>,
                                   in stream: inout Stream, spare: inout [HTTP2HeaderField],
                                   expectedNames: [(bytes: StaticString, name: String)]) {
        let size = name.count + value.count
        guard stream.headers.count < maxResponseHeaderFields, stream.headerBytes + size <= maxResponseHeaderBytes else { return }
        stream.headerBytes += size
        if stream.headers.capacity == 0 {
            // The last response's list when there is one; else room for APNs's one to three
            // headers at once, not one allocation per growth.
            swap(&stream.headers, &spare)
            if stream.headers.capacity == 0 { stream.headers.reserveCapacity(4) }
        }
        var fieldName: String?
        for expected in expectedNames where ByteScan.equals(name, expected.bytes) {
            fieldName = expected.name
            break
        }
        stream.headers.append(HTTP2HeaderField(name: fieldName ?? String(decoding: name, as: UTF8.self),
                                               value: String(decoding: value, as: UTF8.self)))
    }

    func receivedData(streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        guard let index = streams.slot(of: streamID) else { return }
        let (kept, cut) = Self.keepBody(data, in: &streams[slot: index], limit: maxResponseBodyBytes)
        discardedData.kept(kept)
        guard cut, let session else { return }
        // Bounded: past `maxResponseBodyBytes` the stream is reset (CANCEL), so neither memory nor
        // reading grows with what the peer sends; the answer completes with what was kept.
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
    }

    /// Appends what fits of `data` to `stream`'s body, in place; `cut` when this chunk went past
    /// `limit` (the stream is marked cut and must be reset). Nothing is kept once cut.
    private static func keepBody(_ data: UnsafeBufferPointer<UInt8>, in stream: inout Stream,
                                 limit: Int) -> (kept: Int, cut: Bool) {
        guard !stream.responseBodyCut else { return (0, false) }
        let room = limit - stream.responseBody.count
        stream.responseBody.append(contentsOf: data.prefix(room))
        guard data.count > room else { return (data.count, false) }
        stream.responseBodyCut = true
        return (room, true)
    }

    /// nghttp2 gave `increment` bytes of DATA back to the peer: past `maxDiscardedDataBytes` of
    /// them read for nothing, the connection ends (in-flight streams finish `.connectionLost`).
    func sentConnectionWindowUpdate(increment: Int) {
        guard let discarded = discardedData.refilled(increment), !discardCapReached, let session else { return }
        discardCapReached = true
        lastProtocolError = lastProtocolError ?? "the server sent \(discarded) bytes of DATA no open stream keeps"
        _ = nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
    }

    func receivedFrame(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        lastFrameReceivedNanoseconds = coarseMonotonicNanoseconds()
        switch UInt32(header.type) {
        case NGHTTP2_PING.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
                delegate?.connectionDidReceivePingAcknowledgement(self)
            }
        case NGHTTP2_SETTINGS.rawValue:
            guard header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0, let session else { return }
            // The server's limit, clamped to what one connection is allowed to carry.
            let value = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
            peerMaxConcurrentStreamsDidChange(Int(min(value, UInt32(Self.maxStreamsPerConnection))))
        case NGHTTP2_GOAWAY.rawValue:
            goAwayLastStreamID = frame.pointee.goaway.last_stream_id
            goAwayErrorCode = frame.pointee.goaway.error_code
            if state == .ready || state == .waitingForSettings { state = .goingAway }
            delegate?.connectionDidReceiveGoAway(self)
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
               let index = streams.slot(of: header.stream_id) {
                streams[slot: index].responseComplete = true
            }
        default:
            break
        }
    }

    func streamClosed(streamID: Int32, errorCode: UInt32) {
        guard var stream = streams.removeValue(forKey: streamID) else { return }
        let result: Result<HTTP2Response, HTTP2StreamFailure>
        if let answer = Self.takeAnswer(of: &stream) {
            result = .success(answer)
        } else if errorCode == NGHTTP2_REFUSED_STREAM.rawValue || streamID > goAwayLastStreamID {
            result = .failure(.refused)
        } else {
            result = .failure(.reset(code: errorCode))
        }
        delegate?.connection(self, didFinishStream: stream.tag, result: result)
        if case .success(var response) = consume result {
            // Unless the delegate kept the response, the list is this connection's alone again.
            // Emptied field by field: `removeAll(keepingCapacity:)` destroys the fields through
            // the runtime's generic `swift_arrayDestroy`, about 150 instructions more per answer.
            while response.headers.popLast() != nil {}
            swap(&spareHeaders, &response.headers)
        }
    }

    /// The stream's answer once the server has sent all of it (or all that is kept of a cut
    /// body), whatever else became of the stream: the server answered, so the request was
    /// processed. The headers and the body move into the response (a copy would retain both
    /// arrays here and release them again when the stream goes).
    static func takeAnswer(of stream: inout Stream) -> HTTP2Response? {
        guard (stream.responseComplete || stream.responseBodyCut) && stream.status != 0 else { return nil }
        var headers: [HTTP2HeaderField] = []
        var body: [UInt8] = []
        swap(&headers, &stream.headers)
        swap(&body, &stream.responseBody)
        return HTTP2Response(status: stream.status, headers: headers, body: body)
    }

    func readRequestBody(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                         flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let index = streams.slot(of: streamID) else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        return Self.copyRequestBody(of: &streams[slot: index], into: buffer, length: length, flags: flags)
    }

    /// The next chunk of `stream`'s request body, read in place (no copy of the stream).
    private static func copyRequestBody(of stream: inout Stream, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                                        flags: UnsafeMutablePointer<UInt32>) -> Int {
        let count = HTTP2Session.copyBodyChunk(stream.requestBody, from: stream.requestBodyOffset,
                                               into: buffer, length: length, flags: flags)
        stream.requestBodyOffset += count
        return count
    }

    private func peerMaxConcurrentStreamsDidChange(_ value: Int) {
        peerMaxConcurrentStreams = value
        delegate?.connectionDidUpdateSettings(self, maxConcurrentStreams: value)
        if state == .waitingForSettings {
            state = .ready
            delegate?.connectionDidBecomeReady(self)
        }
    }
}
