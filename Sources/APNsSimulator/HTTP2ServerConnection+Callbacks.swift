import HTTP2
import CNGHTTP2

// nghttp2 callbacks of the server session. `userData` is the HTTP2ServerConnection
// (unretained). They run on the loop thread, inside nghttp2_session_mem_recv / mem_send.

@inline(__always)
private func serverConnection(_ userData: UnsafeMutableRawPointer?) -> HTTP2ServerConnection {
    // invariant: every server session is created with its connection as user data.
    Unmanaged<HTTP2ServerConnection>.fromOpaque(userData!).takeUnretainedValue()
}

/// Called when a HEADERS frame starts: a new request stream.
func serverOnBeginHeaders(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                          _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
          frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
    let connection = serverConnection(userData)
    connection.streams[frame.pointee.hd.stream_id] = HTTP2ServerConnection.Stream()
    connection.streamOpened()
    return 0
}

/// Called for each request header field; a header list above the announced maximum resets the
/// stream before the field is copied.
func serverOnHeader(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                    _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
                    _ value: UnsafePointer<UInt8>?, _ valueLength: Int,
                    _ flags: UInt8, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, let name, let value else { return 0 }
    let connection = serverConnection(userData)
    let streamID = frame.pointee.hd.stream_id
    guard let index = connection.streams.index(forKey: streamID) else { return 0 }
    let listBytes = connection.streams.values[index].headerListBytes
        + HTTP2ServerConnection.headerListSize(nameLength: nameLength, valueLength: valueLength)
    guard listBytes <= HTTP2ServerConnection.maxRequestHeaderListBytes else {
        connection.resetStream(streamID, errorCode: NGHTTP2_ENHANCE_YOUR_CALM)
        return 0
    }
    connection.streams.values[index].headerListBytes = listBytes
    let nameText = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
    let valueText = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
    switch nameText {
    case ":method": connection.streams.values[index].method = valueText
    case ":path": connection.streams.values[index].path = valueText
    case ":authority": connection.streams.values[index].authority = valueText
    case ":scheme": break
    default: connection.streams.values[index].headers.append((nameText, valueText))
    }
    return 0
}

/// Called for each chunk of a request body: counted, then kept up to the server's limit (past
/// it the stream is reset, or the rest only counted).
func serverOnDataChunk(_ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32,
                       _ data: UnsafePointer<UInt8>?, _ length: Int,
                       _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let data else { return 0 }
    let connection = serverConnection(userData)
    guard let index = connection.streams.index(forKey: streamID) else { return 0 }
    let received = connection.streams.values[index].bodyLength + length
    connection.streams.values[index].bodyLength = received
    let kept: Int
    switch connection.requestBodyLimit {
    case .reset(let above):
        guard received <= above else {
            connection.resetStream(streamID, errorCode: NGHTTP2_ENHANCE_YOUR_CALM)
            return 0
        }
        kept = length
    case .truncate(let after):
        kept = min(length, max(0, after - connection.streams.values[index].body.count))
    }
    connection.streams.values[index].body.append(contentsOf: UnsafeBufferPointer(start: data, count: kept))
    return 0
}

/// Called when a whole frame was received; END_STREAM completes a request.
func serverOnFrame(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?,
                   _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    let header = frame.pointee.hd
    let type = UInt32(header.type)
    if (type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue),
       header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
        serverConnection(userData).dispatch(streamID: header.stream_id)
    } else if type == NGHTTP2_PING.rawValue {
        let acknowledgement = header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
        serverConnection(userData).pingReceived(acknowledgement: acknowledgement)   // nghttp2 acknowledges PINGs itself
    } else if type == NGHTTP2_SETTINGS.rawValue {
        if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
            serverConnection(userData).settingsAcknowledged()
        } else {
            serverConnection(userData).clientPrefaceReceived()
        }
    }
    return 0
}

/// Called when a stream closed: forget it (a later respond() is ignored, a waiting answer is
/// withdrawn).
func serverOnStreamClose(_ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32,
                         _ userData: UnsafeMutableRawPointer?) -> Int32 {
    serverConnection(userData).forgetStream(streamID)
    return 0
}

/// The response body's data source: copies the next bytes of the stream's response.
func serverReadResponseBody(_ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?,
                            _ length: Int, _ dataFlags: UnsafeMutablePointer<UInt32>?,
                            _ source: UnsafeMutablePointer<nghttp2_data_source>?,
                            _ userData: UnsafeMutableRawPointer?) -> Int {
    guard let buffer, let dataFlags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let connection = serverConnection(userData)
    guard let index = connection.streams.index(forKey: streamID) else {
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    let offset = connection.streams.values[index].responseOffset
    let count = HTTP2Session.copyBodyChunk(connection.streams.values[index].responseBody, from: offset,
                                           into: buffer, length: length, flags: dataFlags)
    connection.streams.values[index].responseOffset = offset + count
    return count
}

extension HTTP2Session {
    /// A server session announcing `maxConcurrentStreams` and the maximum header list size; the
    /// SETTINGS are queued.
    static func makeServer(userData: UnsafeMutableRawPointer, maxConcurrentStreams: Int) throws -> OpaquePointer {
        let session = try make(userData: userData, server: true) { callbacks in
            nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, serverOnBeginHeaders)
            nghttp2_session_callbacks_set_on_header_callback(callbacks, serverOnHeader)
            nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, serverOnDataChunk)
            nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, serverOnFrame)
            nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, serverOnStreamClose)
        }
        try submitSettings(session, [
            (NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, UInt32(clamping: maxConcurrentStreams)),
            (NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, UInt32(HTTP2ServerConnection.maxRequestHeaderListBytes)),
        ])
        return session
    }
}
