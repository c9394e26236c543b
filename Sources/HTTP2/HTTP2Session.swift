import CNGHTTP2

/// Creating nghttp2 sessions (mem API: no send/recv callbacks) with the client's callbacks here,
/// or the server's (in the APNsSimulator module, through the `package` API). `userData` is the owning connection, passed unretained: the owner deletes
/// the session before it goes away.
package enum HTTP2Session {
    /// The receive window of the whole connection (streams keep nghttp2's 64 KiB default).
    package static let connectionWindowSize: Int32 = 16 << 20

    /// A client session with push disabled; the SETTINGS are queued. It allocates through
    /// `memory`, which must outlive it.
    static func makeClient(userData: UnsafeMutableRawPointer, memory: HTTP2SessionMemory) throws -> OpaquePointer {
        let session = try make(userData: userData, server: false, memory: memory) { callbacks in
            nghttp2_session_callbacks_set_on_header_callback(callbacks, clientOnHeader)
            nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, clientOnDataChunk)
            nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, clientOnFrame)
            nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, clientOnStreamClose)
            nghttp2_session_callbacks_set_error_callback2(callbacks, clientOnError)
            nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, clientOnFrameSend)
        }
        do {
            try submitSettings(session, [(NGHTTP2_SETTINGS_ENABLE_PUSH, 0)])
        } catch {
            nghttp2_session_del(session)
            throw error
        }
        return session
    }

    /// Queues a SETTINGS frame.
    package static func submitSettings(_ session: OpaquePointer, _ values: [(nghttp2_settings_id, UInt32)]) throws {
        var entries = values.map { nghttp2_settings_entry(settings_id: Int32($0.0.rawValue), value: $0.1) }
        let result = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        guard result == 0 else {
            throw HTTP2Error(.http2, "nghttp2_submit_settings: \(String(cString: nghttp2_strerror(result)))")
        }
    }

    /// Copies the next chunk of `body` (from `offset`) for an nghttp2 data source and sets
    /// `NGHTTP2_DATA_FLAG_EOF` at the end. Returns the bytes copied.
    package static func copyBodyChunk(_ body: [UInt8], from offset: Int, into buffer: UnsafeMutablePointer<UInt8>,
                              length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        body.withUnsafeBufferPointer { bytes -> Int in
            let count = max(0, min(length, bytes.count - offset))
            if count > 0, let base = bytes.baseAddress { buffer.update(from: base + offset, count: count) }
            if offset + count >= bytes.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
            return count
        }
    }

    package static func make(userData: UnsafeMutableRawPointer, server: Bool, memory: HTTP2SessionMemory? = nil,
                             _ configure: (OpaquePointer) -> Void) throws -> OpaquePointer {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw HTTP2Error(.http2, "nghttp2_session_callbacks_new failed")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        configure(callbacks)
        var session: OpaquePointer?
        let result: Int32
        if var allocator = memory?.nghttp2Memory {  // nghttp2 copies the struct
            result = server
                ? nghttp2_session_server_new3(&session, callbacks, userData, nil, &allocator)
                : nghttp2_session_client_new3(&session, callbacks, userData, nil, &allocator)
        } else {
            result = server
                ? nghttp2_session_server_new(&session, callbacks, userData)
                : nghttp2_session_client_new(&session, callbacks, userData)
        }
        guard result == 0, let session else {
            throw HTTP2Error(.http2, "cannot create nghttp2 session: \(String(cString: nghttp2_strerror(result)))")
        }
        _ = nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, connectionWindowSize)
        return session
    }
}
