/// Plays a server's bytes to a client connection in memory, after a valid handshake, with a few
/// requests open: what the fuzzer of the response path runs for every input, and what its
/// regression tests run for the inputs it found. Not used by the bridge.
package enum HTTP2ResponseReplay {
    /// How one replay ended.
    package struct Outcome: Sendable {
        /// Every stream's result, in the order the connection reported them.
        package var results: [(tag: UInt64, result: Result<HTTP2Response, HTTP2StreamFailure>)] = []
        /// The tags submitted (one per stream opened).
        package var submittedTags: [UInt64] = []
        /// Why the connection closed (the replay closes it at the end when the bytes did not).
        package var closeReason: String?
        /// Whether the connection was ready when the server's bytes arrived.
        package var wasReady = false
    }

    /// A server's side of the handshake: SETTINGS (MAX_CONCURRENT_STREAMS 1000), then the
    /// acknowledgement of the client's SETTINGS. The server sends no preface string.
    package static let serverHandshake: [UInt8] = [
        0, 0, 6, 0x4, 0x0, 0, 0, 0, 0, 0x00, 0x03, 0x00, 0x00, 0x03, 0xE8,
        0, 0, 0, 0x4, 0x1, 0, 0, 0, 0,
    ]

    /// Handshake, `streams` requests (stream ids 1, 3, 5…, tags 1, 2, 3…, each with a small
    /// body), then `serverBytes` in two reads (split in the middle, with the client's writes in
    /// between), then a close. Like the APNs pool, the client submits a new request from inside
    /// the callback that finishes a stream, up to `resubmissions` times (tags after the first
    /// `streams`). Loop thread.
    package static func run(serverBytes: [UInt8], streams: Int, resubmissions: Int = 0,
                            loop: EventLoop, tls: TLSClientContext) throws -> Outcome {
        let recorder = Recorder(resubmissions: resubmissions)
        let connection = try HTTP2ClientConnection.makeInMemory(loop: loop, tls: tls, delegate: recorder)
        _ = connection.sendInMemory()
        _ = connection.receiveInMemory(serverHandshake)
        recorder.outcome.wasReady = connection.isReady
        for _ in 0..<max(0, streams) { recorder.submitNext(on: connection) }
        _ = connection.sendInMemory()
        let middle = serverBytes.count / 2
        _ = connection.receiveInMemory(Array(serverBytes[..<middle]))
        _ = connection.receiveInMemory(Array(serverBytes[middle...]))
        connection.close()
        return recorder.outcome
    }

    /// Records what the connection reports, and submits more requests as streams finish.
    private final class Recorder: HTTP2ClientConnectionDelegate {
        var outcome = Outcome()
        var resubmissions: Int
        var nextTag: UInt64 = 1

        init(resubmissions: Int) {
            self.resubmissions = resubmissions
        }

        func submitNext(on connection: HTTP2ClientConnection) {
            let tag = nextTag
            nextTag += 1
            let request = HTTP2Request(path: "/3/device/\(tag)", headers: [("apns-topic", "com.example.app")],
                                       body: Array("{\"aps\":{\"alert\":\"\(tag)\"}}".utf8))
            if connection.submit(request, tag: tag) { outcome.submittedTags.append(tag) }
        }

        func connectionDidBecomeReady(_ connection: HTTP2ClientConnection) {}

        func connection(_ connection: HTTP2ClientConnection, didFinishStream tag: UInt64,
                        result: Result<HTTP2Response, HTTP2StreamFailure>) {
            outcome.results.append((tag, result))
            if resubmissions > 0, connection.canStartStreams {
                resubmissions -= 1
                submitNext(on: connection)
            }
        }

        func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {}

        func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String) {
            outcome.closeReason = reason
        }
    }
}
