import APNsSimulator
import Testing
@testable import HTTP2

/// The client against a peer that breaks HTTP/2 in ways an nghttp2 server never would
/// (`HostileHTTP2Peer`, real TLS on 127.0.0.1): what the client reads stays bounded, every stream
/// gets one result, and what the peer saw shows how the client reacted.
@Suite(.timeLimit(.minutes(1)))
struct HostilePeerTests {
    /// Credentials, the hostile peer and one client connection to it.
    private struct Fixture {
        let credentials: TestCredentials
        let peer: HostileHTTP2Peer
        let client: TestClient

        /// `streamTimeoutNanoseconds` defaults to far beyond the test's waits: no result may come
        /// from the stream deadline.
        init(_ behaviour: HostileHTTP2Peer.Behaviour, maxResponseBodyBytes: Int = 16 * 1024,
             streamTimeoutNanoseconds: UInt64 = 120_000_000_000) throws {
            credentials = try TestCredentials()
            peer = try HostileHTTP2Peer(certificateFile: credentials.files.serverCertificatePath,
                                        privateKeyFile: credentials.files.serverPrivateKeyPath, behaviour: behaviour)
            client = try TestClient(port: peer.port, tls: try TLSClientContext(credentials.clientConfiguration),
                                    streamTimeoutNanoseconds: streamTimeoutNanoseconds, maxResponseBodyBytes: maxResponseBodyBytes)
        }

        /// Submits `tags` together (one flush) and expects every one accepted; each request's
        /// body is `bodyBytes` long when given.
        func submit(_ tags: ClosedRange<UInt64>, bodyBytes: Int? = nil) async {
            let connection = client.connection
            let accepted = await onLoop(client.loop) {
                defer { connection.flush() }
                return tags.filter { tag in
                    var request = testRequest(tag: tag)
                    if let bodyBytes { request.body = [UInt8](repeating: 0x61, count: bodyBytes) }
                    return connection.submit(request, tag: tag)
                }.count
            }
            #expect(accepted == tags.count)
        }

        func tearDown() {
            client.loop.shutdown()
            peer.stop()
            credentials.remove()
        }
    }

    /// A `:status` value is three digits or no status at all: no value (nghttp2 refuses these
    /// first, but the parse does not lean on it) can overflow the arithmetic.
    @Test func aStatusValueIsThreeDigitsOrNone() {
        func code(_ text: String) -> Int {
            Array(text.utf8).withUnsafeBufferPointer { HTTP2ClientConnection.statusCode($0) }
        }
        #expect(code("200") == 200)
        #expect(code("503") == 503)
        #expect(code("099") == 99)
        #expect(code("") == 0)
        #expect(code("20") == 0)
        #expect(code("2000") == 0)
        #expect(code("2a0") == 0)
        #expect(code(" 200") == 0)
        #expect(code(String(repeating: "9", count: 40)) == 0)
    }

    @Test func endlessDataIsCutAtTheBodyCapByResettingTheStream() async throws {
        let fixture = try Fixture(.endlessData(status: 200))
        defer { fixture.tearDown() }
        #expect(try await fixture.client.connect())
        await fixture.submit(1...3)
        #expect(await eventually { fixture.client.delegate.finishCount == 3 })
        for tag in UInt64(1)...3 {
            guard case .success(let response)? = fixture.client.delegate.result(tag) else {
                Issue.record("stream \(tag): \(String(describing: fixture.client.delegate.result(tag)))")
                continue
            }
            // The answer is its status and what was kept: exactly the cap, nothing buffered beyond.
            #expect(response.status == 200 && response.body.count == 16 * 1024)
        }
        // The client reset every stream (CANCEL) instead of reading on: the peer, which sends as
        // long as flow control lets it, got no more than the stream's initial window through.
        #expect(await eventually { fixture.peer.observations.resetsReceived.count == 3 })
        let seen = fixture.peer.observations
        #expect(Set(seen.resetsReceived.values) == [0x8])
        let sent = fixture.peer.dataBytesSentOnStreams
        #expect(sent.reset.count == 3 && sent.notReset.isEmpty)
        #expect(sent.reset.allSatisfy { $0 > 16 * 1024 && $0 <= 65_535 })
        // Resetting streams costs nothing else: the same connection takes the next request.
        await fixture.submit(4...4)
        #expect(await eventually { fixture.client.delegate.finishCount == 4 })
        #expect(fixture.client.delegate.closeReason == nil, "\(fixture.peer.observations.endReasons)")
        #expect(fixture.peer.observations.connectionsAccepted == 1 && fixture.peer.observations.goAwaysReceived.isEmpty)
    }

    @Test(arguments: HostileHTTP2Peer.InvalidHeaderBlock.allCases)
    func invalidHPACKIsAConnectionErrorThatFinishesEveryStream(block: HostileHTTP2Peer.InvalidHeaderBlock) async throws {
        let fixture = try Fixture(.invalidHPACK(block))
        defer { fixture.tearDown() }
        #expect(try await fixture.client.connect())
        await fixture.submit(1...2)
        #expect(await eventually { fixture.client.delegate.finishCount == 2 && fixture.client.delegate.closeReason != nil })
        // The header table can no longer be trusted: GOAWAY COMPRESSION_ERROR, and the connection
        // closes with its reason; each open stream finishes once, as lost (the caller may retry).
        let reason = try #require(fixture.client.delegate.closeReason)
        #expect(reason.contains("HTTP/2 protocol error"))
        #expect(reason.contains("COMPRESSION_ERROR") || reason.lowercased().contains("compression"))
        for tag in UInt64(1)...2 {
            #expect(fixture.client.delegate.failure(tag) == .connectionLost(reason))
        }
        #expect(await eventually { fixture.peer.observations.goAwaysReceived == [0x9] }, "\(fixture.peer.observations) \(reason)")
    }

    @Test func resetStreamsAndAFloodOfResetsForClosedStreamsLeaveTheConnectionUsable() async throws {
        // REFUSED_STREAM, INTERNAL_ERROR, CANCEL in turn, each followed by 50 resets of closed streams.
        let fixture = try Fixture(.resetStreams(codes: [0x7, 0x2, 0x8], closedStreamFlood: 50))
        defer { fixture.tearDown() }
        #expect(try await fixture.client.connect())
        for round in UInt64(0)..<4 {
            // One stream at a time, so that the peer's codes follow the tags.
            let tag = round * 3
            for offset in UInt64(1)...3 {
                await fixture.submit((tag + offset)...(tag + offset))
                #expect(await eventually { fixture.client.delegate.finishCount == Int(tag + offset) })
            }
            #expect(fixture.client.delegate.failure(tag + 1) == .refused)
            #expect(fixture.client.delegate.failure(tag + 2) == .reset(code: 0x2))
            #expect(fixture.client.delegate.failure(tag + 3) == .reset(code: 0x8))
        }
        // 600 resets for streams already closed were ignored: the connection is the first one and open.
        let seen = fixture.peer.observations
        #expect(seen.resetsSent == 12 * 51)
        #expect(seen.connectionsAccepted == 1 && seen.goAwaysReceived.isEmpty && seen.headersReceived == 12)
        #expect(fixture.client.delegate.closeReason == nil)
        let connection = fixture.client.connection
        #expect(await onLoop(fixture.client.loop) { connection.canStartStreams })
    }
}

extension HostilePeerTests {
    /// Also when an answer held a field nghttp2 ignored (and reported): that report is no
    /// protocol error of the connection and must not turn the cap off.
    @Test(arguments: [false, true])
    func aPeerIgnoringResetsIsCutOffAfterTheConnectionsDiscardCap(invalidHeaderName: Bool) async throws {
        let fixture = try Fixture(.endlessData(status: 200, ignoringResets: true, invalidHeaderName: invalidHeaderName))
        defer { fixture.tearDown() }
        #expect(try await fixture.client.connect())
        await fixture.submit(1...2)
        #expect(await eventually { fixture.client.delegate.finishCount == 2 })
        // The streams were cut and reset, but the peer sends on, held back only by the connection
        // window: once the client has read more than the cap for nothing, it ends the connection.
        #expect(await eventually { fixture.client.delegate.closeReason != nil })
        let reason = try #require(fixture.client.delegate.closeReason)
        #expect(reason.hasPrefix("HTTP/2 protocol error: the server sent") && reason.hasSuffix("bytes of DATA no open stream keeps"))
        // (Its GOAWAY ENHANCE_YOUR_CALM may not reach a peer busy writing: the close resets TCP.)
        #expect(await eventually { fixture.peer.observations.connectionsEnded == 1 })
        // Read at most: the 16 MiB connection window, then the one refill that revealed the waste.
        let sent = fixture.peer.observations.dataBytesSent.values.reduce(0, +)
        #expect(sent > HTTP2ClientConnection.maxDiscardedDataBytes)
        #expect(sent <= Int(HTTP2Session.connectionWindowSize) + Int(HTTP2Session.connectionWindowSize) / 2)
    }
}

extension HostilePeerTests {
    /// A server may answer before it has read a request's body (RFC 9113 §8.1). When it does and
    /// never lets the body finish (no stream window, no RST_STREAM), the stream stays open with
    /// its whole answer: whether the stream deadline or a lost connection ends it, the answer is
    /// the result, not a timeout or a lost connection that would send the request again.
    @Test(arguments: [false, true])
    func anAnswerThatArrivedBeforeTheBodyWentOutIsTheResult(connectionLost: Bool) async throws {
        let fixture = try Fixture(.answerBeforeBody(status: 400),
                                  streamTimeoutNanoseconds: connectionLost ? 120_000_000_000 : 1_000_000_000)
        defer { fixture.tearDown() }
        #expect(try await fixture.client.connect())
        // Longer than the 64 KiB stream window the peer never opens.
        await fixture.submit(1...2, bodyBytes: 100_000)
        #expect(await eventually { fixture.peer.observations.headersReceived == 2 })
        if connectionLost {
            // Once the client has acknowledged the PINGs sent after the answers, it has read
            // them: stopping then cannot reset them away unread.
            #expect(await eventually { fixture.peer.observations.pingAcksReceived == 2 })
            fixture.peer.stop()
        }
        #expect(await eventually { fixture.client.delegate.finishCount == 2 })
        for tag in UInt64(1)...2 {
            guard case .success(let response)? = fixture.client.delegate.result(tag) else {
                Issue.record("stream \(tag): \(String(describing: fixture.client.delegate.result(tag)))")
                continue
            }
            #expect(response.status == 400)
        }
    }
}

extension HostilePeerTests {
    /// Streams whose HEADERS never left the client (its output full, the server not reading)
    /// end `.refused` when the connection is lost or their deadline passes: the server cannot
    /// have processed them, so they are re-sent without counting as an attempt. The streams
    /// that were written end as a lost connection or a timeout.
    @Test(arguments: [false, true])
    func streamsNeverWrittenEndRefused(connectionLost: Bool) async throws {
        let fixture = try Fixture(.stopsReading, streamTimeoutNanoseconds: connectionLost ? 120_000_000_000 : 2_000_000_000)
        defer { fixture.tearDown() }
        #expect(try await fixture.client.connect())
        let written: ClosedRange<UInt64> = 1...90
        await fixture.submit(written, bodyBytes: 256 * 1024)
        // The server stopped reading: the sockets' buffers fill, then (each flush producing
        // more of the bodies) the client's own output.
        let connection = fixture.client.connection
        #expect(await eventuallyAsync {
            await onLoop(fixture.client.loop) {
                connection.flush()
                return (connection.connection?.pendingOutputCount ?? 0) >= TLSConnection.outputHighWater
            }
        })
        let neverWritten: ClosedRange<UInt64> = 91...95
        await fixture.submit(neverWritten)
        if connectionLost {
            fixture.peer.stop()
        }
        #expect(await eventually { fixture.client.delegate.finishCount == 95 })
        for tag in written {
            switch fixture.client.delegate.failure(tag) {
            case .connectionLost? where connectionLost, .timeout? where !connectionLost: break
            case let other: Issue.record("stream \(tag) (written): \(String(describing: other))")
            }
        }
        for tag in neverWritten {
            #expect(fixture.client.delegate.failure(tag) == .refused, "stream \(tag) (never written)")
        }
    }
}

extension HostilePeerTests {
    /// HEADERS frames the session wrote into the client's output while the socket would block
    /// (the server not reading) never reach the server if the connection is lost: their streams
    /// end `.refused`, and those whose HEADERS the socket took as a lost connection. At a
    /// deadline, with the connection alive, the output still goes out when the socket drains
    /// (a reset cannot take it back), so there every stream ends `.timeout`.
    @Test(arguments: [false, true])
    func streamsWaitingInTheOutputEndRefusedWhenTheConnectionIsLost(connectionLost: Bool) async throws {
        let fixture = try Fixture(.stopsReading, streamTimeoutNanoseconds: connectionLost ? 120_000_000_000 : 2_000_000_000)
        defer { fixture.tearDown() }
        #expect(try await fixture.client.connect())
        let connection = fixture.client.connection
        // One 256 KiB body at a time until the socket would block (the server stopped reading)
        // with at least 640 KiB in the output: then the session goes on writing into it (less
        // than its high-water mark, 1 MiB), behind bytes the socket does not take. Had the output
        // held only a little, the socket could still take all of it, HEADERS included, once the
        // server's kernel acknowledged what was in flight when the socket first blocked (at most
        // its receive window, a few hundred KiB while the server does not read). (Fewer than
        // the peer's 100 streams.)
        var sent: UInt64 = 0
        var blocked = false
        var firstBehindPendingBytes: UInt64?  // the first body submitted when the socket would block
        while !blocked && sent < 90 {
            sent += 1
            await fixture.submit(sent...sent, bodyBytes: 256 * 1024)
            let pending = await onLoop(fixture.client.loop) { connection.connection?.pendingOutputCount ?? 0 }
            if pending > 0 && firstBehindPendingBytes == nil { firstBehindPendingBytes = sent }
            blocked = pending >= 640 * 1024 && pending < TLSConnection.outputHighWater
        }
        try #require(blocked, "the socket never blocked")
        let mayHaveWaited = try #require(firstBehindPendingBytes)...sent
        let waiting = (sent + 1)...(sent + 5)
        await fixture.submit(waiting)
        // Their HEADERS are in the output, not taken by the socket.
        #expect(await onLoop(fixture.client.loop) { connection.writtenStreams.waitingCount } >= waiting.count)
        if connectionLost {
            fixture.peer.stop()
        }
        #expect(await eventually { fixture.client.delegate.finishCount == Int(sent) + waiting.count })
        for tag in 1...sent {
            switch fixture.client.delegate.failure(tag) {
            case .connectionLost? where connectionLost, .timeout? where !connectionLost: break
            // The bodies' streams from the first one after which bytes were left in the output:
            // their HEADERS may have waited there too (the first one's when the socket's buffer
            // had filled up without refusing the previous write).
            case .refused? where connectionLost && mayHaveWaited.contains(tag): break
            case let other: Issue.record("stream \(tag) (taken by the socket): \(String(describing: other))")
            }
        }
        for tag in waiting {
            #expect(fixture.client.delegate.failure(tag) == (connectionLost ? .refused : .timeout), "stream \(tag) (in the output)")
        }
    }
}

extension HostilePeerTests {
    /// The streams' marks as frames enter the output and the socket takes its bytes: in order,
    /// and the entries taken are let go even when the output never empties.
    @Test func writtenStreamsFollowTheSocketAndKeepOnlyWhatWaits() {
        var marks = HTTP2WrittenStreams()
        marks.appended(streamID: 1, endingAt: 100)
        marks.appended(streamID: 3, endingAt: 250)
        #expect(marks.highestProduced == 3 && marks.highest == 0)
        marks.socketTook(99)
        #expect(marks.highest == 0 && marks.waitingCount == 2)
        marks.socketTook(100)
        #expect(marks.highest == 1 && marks.waitingCount == 1)
        marks.socketTook(1_000)
        #expect(marks.highest == 3 && marks.waitingCount == 0 && marks.storedCount == 0)
        // A socket always one frame behind: what it took is dropped, what waits is kept.
        var end = 1_000
        for stream in stride(from: Int32(5), to: 100_005, by: 2) {
            end += 100
            marks.appended(streamID: stream, endingAt: end)
            marks.socketTook(end - 100)
        }
        #expect(marks.waitingCount == 1 && marks.highest == 100_001 && marks.highestProduced == 100_003)
        #expect(marks.storedCount <= 2_048, "\(marks.storedCount) entries kept")
    }
}
