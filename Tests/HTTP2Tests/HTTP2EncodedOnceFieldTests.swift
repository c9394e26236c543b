import CNGHTTP2
@testable import HTTP2
import Testing

/// A field encoded once per connection (the provider token): what goes on the wire is byte for
/// byte what nghttp2 writes when it encodes the field for every request, and only frames that
/// hold the stand-in at a field's boundary are changed.
@Suite struct HTTP2EncodedOnceFieldTests {
    static let firstToken = "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ.eyJpc3MiOiJERUYxMjNHSElKIiwiaWF0IjoxNzAwMDAwMDAwfQ."
        + String(repeating: "Qx7_-a9Z", count: 11)
    static let secondToken = "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ.eyJpc3MiOiJERUYxMjNHSElKIiwiaWF0IjoxNzAwMDAzNjAwfQ."
        + String(repeating: "mK3-Tz_8", count: 11)

    /// Swaps for the token `value` (the first stand-in).
    static func swaps(for value: String) throws -> (HTTP2EncodedOnceSwaps, HTTP2EncodedOnceField) {
        var swaps = HTTP2EncodedOnceSwaps()
        swaps.encode("authorization", value: value)
        return (swaps, try #require(swaps.current))
    }

    /// One request's fields as the APNs client writes them: path, token, two more headers.
    static func submit(_ tag: UInt64, token: String, on connection: HTTP2ClientConnection) -> Bool {
        let device = String(repeating: "a1b2c3d4", count: 8)
        let byteCount = "/3/device/".utf8.count + device.utf8.count + token.utf8.count + "alert".utf8.count
            + "com.example.chat".utf8.count
        return connection.submit(tag: tag, body: Array("{\"aps\":{}}".utf8), fieldCount: 4, byteCount: byteCount) { block in
            block.add(":path", "/3/device/", device)
            block.add("authorization", token)
            block.add("apns-push-type", "alert")
            block.add("apns-topic", "com.example.chat")
        }
    }

    /// What a client connection writes: the handshake, three requests with the first token, two
    /// with the second. `encodingOnce`: the connection encodes each token once, and its frames
    /// are taken from the session both as they are (`raw`) and as the connection sends them.
    static func clientBytes(encodingOnce: Bool, loop: EventLoop,
                            tls: TLSClientContext) throws -> (sent: [UInt8], raw: [UInt8]) {
        let connection = try HTTP2ClientConnection.makeInMemory(loop: loop, tls: tls, delegate: SilentDelegate())
        var sent: [UInt8] = []
        var raw: [UInt8] = []
        func drain() {
            guard encodingOnce else {
                sent += connection.sendInMemory()
                return
            }
            HeadersFrames.drain(connection, sent: &sent, raw: &raw)
        }
        drain()
        _ = connection.receiveInMemory(HTTP2ResponseReplay.serverHandshake)  // SETTINGS: its ACK follows in `drain`
        if encodingOnce { connection.encodeOnce("authorization", value: firstToken) }
        for tag: UInt64 in 1...3 { #expect(submit(tag, token: firstToken, on: connection)) }
        drain()
        if encodingOnce { connection.encodeOnce("authorization", value: secondToken) }
        for tag: UInt64 in 4...5 { #expect(submit(tag, token: secondToken, on: connection)) }
        drain()
        connection.close()
        return (sent, raw)
    }

    @Test func theWireBytesAreThoseOfTheFieldEncodedPerRequest() async throws {
        let loop = try EventLoop(name: "encoded-once")
        defer { loop.shutdown() }
        let tls = try TLSClientContext(TLSClientConfiguration())
        let bytes = await onLoop(loop) {
            Result { (try Self.clientBytes(encodingOnce: true, loop: loop, tls: tls),
                      try Self.clientBytes(encodingOnce: false, loop: loop, tls: tls).sent) }
        }
        let (encodedOnce, encodedPerRequest) = try bytes.get()
        // The session itself wrote the stand-ins (the second token's differs from the first's):
        // the token was not encoded per request...
        let raw = try #require(HeadersFrames.decode(encodedOnce.raw))
        #expect(raw.map { $0["authorization"] } == ["-", "-", "-", "~", "~"])
        // ...and what went out is byte for byte what nghttp2 writes when it is.
        #expect(encodedOnce.sent == encodedPerRequest)
        // What a peer decodes from it (one HPACK context across the five blocks).
        let blocks = try #require(HeadersFrames.decode(encodedOnce.sent))
        #expect(blocks.map { $0["authorization"] } == [Self.firstToken, Self.firstToken, Self.firstToken,
                                                        Self.secondToken, Self.secondToken])
        #expect(blocks.allSatisfy { $0["apns-topic"] == "com.example.chat" && $0[":method"] == "POST" })
    }

    /// Requests submitted before the token changes and not written yet go out with the token
    /// they were submitted with (the one the pool recorded for them); after nil, new requests
    /// carry their own value and those waiting still get theirs. Written by the connection's own
    /// path (`sendInMemory`), the bytes are those of a connection encoding each token per request.
    @Test func requestsWaitingThroughATokenChangeKeepTheirToken() async throws {
        let loop = try EventLoop(name: "encoded-once-waiting")
        defer { loop.shutdown() }
        let tls = try TLSClientContext(TLSClientConfiguration())
        let outputs = await onLoop(loop) {
            Result {
                try [true, false].map { encodingOnce -> [UInt8] in
                    let connection = try HTTP2ClientConnection.makeInMemory(loop: loop, tls: tls, delegate: SilentDelegate())
                    var written = connection.sendInMemory()
                    written += connection.receiveInMemory(HTTP2ResponseReplay.serverHandshake)
                    func change(to token: String?) {
                        if encodingOnce { connection.encodeOnce("authorization", value: token) }
                    }
                    change(to: Self.firstToken)
                    for tag: UInt64 in 1...2 { #expect(Self.submit(tag, token: Self.firstToken, on: connection)) }
                    change(to: Self.secondToken)
                    #expect(Self.submit(3, token: Self.secondToken, on: connection))
                    written += connection.sendInMemory()
                    #expect(Self.submit(4, token: Self.secondToken, on: connection))
                    change(to: nil)
                    #expect(Self.submit(5, token: Self.secondToken, on: connection))
                    written += connection.sendInMemory()
                    connection.close()
                    return written
                }
            }
        }
        let written = try outputs.get()
        #expect(written[0] == written[1])
        let blocks = try #require(HeadersFrames.decode(written[0]))
        #expect(blocks.map { $0["authorization"] } == [Self.firstToken, Self.firstToken, Self.secondToken,
                                                        Self.secondToken, Self.secondToken])
    }

    @Test func aBlockCarriesTheStandInOnlyForTheSameFieldInASmallBlock() throws {
        let (_, field) = try Self.swaps(for: Self.firstToken)
        func value(of token: String, extraBytes: Int) -> String {
            let padding = String(repeating: "x", count: extraBytes)
            let byteCount = token.utf8.count + padding.utf8.count
            return HeaderBlock.withRequestHeaders(authority: "api.push.apple.com", fieldCount: 2, byteCount: byteCount,
                                                  encodedOnce: field, writeFields: { block in
                                                      block.add("authorization", token)
                                                      block.add("x-padding", padding)
                                                  }) { block in
                let authorization = block.nameValues[3]
                return String(decoding: UnsafeBufferPointer(start: authorization.value, count: authorization.valuelen), as: UTF8.self)
            }
        }
        #expect(value(of: Self.firstToken, extraBytes: 0) == "-")
        #expect(value(of: Self.secondToken, extraBytes: 0) == Self.secondToken)  // another value
        // A value equal to the token as a `String` but not byte for byte (U+212A KELVIN SIGN is
        // canonically "K") is not the field.
        let kelvin = "bearer \u{212A}" + Self.firstToken.dropFirst("bearer K".count)
        let ascii = "bearer K" + Self.firstToken.dropFirst("bearer K".count)
        #expect(kelvin == ascii && Array(kelvin.utf8) != Array(ascii.utf8))
        let (_, asciiField) = try Self.swaps(for: ascii)
        #expect(asciiField.matches("authorization", ascii))
        #expect(!asciiField.matches("authorization", kelvin))
        #expect(value(of: Self.firstToken, extraBytes: HTTP2EncodedOnceField.maxBlockBytes) == Self.firstToken)
    }

    @Test func onlyNeverIndexedFieldsAreEncodedOnce() {
        #expect(HTTP2EncodedOnceField(name: "authorization", value: Self.firstToken, standIn: "-") != nil)
        // nghttp2 indexes these (a later request sends an index), so a swap would desynchronise
        // the two HPACK tables: refused.
        #expect(HTTP2EncodedOnceField(name: "apns-topic", value: "com.example.chat", standIn: "-") == nil)
        #expect(HTTP2EncodedOnceField(name: "authorization", value: "", standIn: "-") == nil)
        #expect(HTTP2EncodedOnceField(name: "authorization", value: String(repeating: "a", count: 1025), standIn: "-") == nil)
        #expect(HTTP2EncodedOnceField(name: "authorization", value: "bearer caf\u{E9}", standIn: "-") == nil)
        // A refused field leaves new requests with their own values.
        var swaps = HTTP2EncodedOnceSwaps()
        swaps.encode("apns-topic", value: "com.example.chat")
        #expect(swaps.current == nil)
    }

    /// A HEADERS frame (stream 1) around `block`, with `flags` and what they add.
    static func headersFrame(_ block: [UInt8], flags: UInt8 = HTTP2FrameLayout.endHeadersFlag, type: UInt8 = 0x01,
                             padding: Int = 0) -> [UInt8] {
        var payload: [UInt8] = []
        if flags & HTTP2FrameLayout.paddedFlag != 0 { payload.append(UInt8(padding)) }
        if flags & HTTP2FrameLayout.priorityFlag != 0 { payload += [0, 0, 0, 0, 15] }
        payload += block
        if flags & HTTP2FrameLayout.paddedFlag != 0 { payload += [UInt8](repeating: 0, count: padding) }
        let length = payload.count
        return [UInt8(length >> 16), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF), type, flags, 0, 0, 0, 1] + payload
    }

    static func swapped(_ frame: [UInt8], _ swaps: HTTP2EncodedOnceSwaps) -> (Bool, [UInt8]) {
        var swaps = swaps
        var output: [UInt8] = [0xAA]  // what was written before stays
        let swapped = frame.withUnsafeBufferPointer { swaps.appendSwapping($0, to: &output) }
        #expect(output.first == 0xAA)
        return (swapped, Array(output.dropFirst()))
    }

    @Test func theStandInIsSwappedAtAFieldsBoundaryWithPaddingAndPriority() throws {
        let (swaps, field) = try Self.swaps(for: Self.firstToken)
        // :method POST (indexed), a literal `:path` with a plain value, the stand-in, an indexed field.
        let before: [UInt8] = [0x83, 0x04, 0x03] + Array("/ab".utf8)
        let after: [UInt8] = [0xBE]
        for flags in [HTTP2FrameLayout.endHeadersFlag, HTTP2FrameLayout.endHeadersFlag | 0x01,
                      HTTP2FrameLayout.endHeadersFlag | HTTP2FrameLayout.paddedFlag | HTTP2FrameLayout.priorityFlag] {
            let frame = Self.headersFrame(before + field.standInEncoded + after, flags: flags, padding: 3)
            let (swapped, output) = Self.swapped(frame, swaps)
            #expect(swapped)
            #expect(output == Self.headersFrame(before + field.encoded + after, flags: flags, padding: 3))
        }
    }

    /// Blocks as nghttp2 encodes them, with everything its deflater writes (indexed fields,
    /// literals with and without indexing and with new names, never-indexed fields, table size
    /// updates, Huffman-coded and plain strings), the stand-in anywhere among them: each swap
    /// gives the block nghttp2 writes with the token itself.
    @Test func theSwapGivesNghttp2sOwnBlockWhateverSurroundsTheStandIn() throws {
        let (swaps, _) = try Self.swaps(for: Self.firstToken)
        let withStandIn = try BlockDeflater()
        let withToken = try BlockDeflater()
        let names = [":method", ":path", ":authority", "apns-topic", "apns-push-type", "apns-collapse-id",
                     "content-type", "apns-expiration", "cookie"]
        for round in 0..<400 {
            if round % 97 == 50 {  // both tables resized: the next blocks start with a size update
                for deflater in [withStandIn, withToken] { deflater.changeTableSize(round % 2 == 0 ? 256 : 4096) }
            }
            var fields: [(name: String, value: String, neverIndexed: Bool)] = []
            for index in 0..<(1 + round % 7) {
                let name = index % 4 == 3 ? "x-custom-\(round % 13)" : names[(round + index * 3) % names.count]
                let value = "v\((round * 7 + index) % 23)" + String(repeating: "Zz9", count: (round + index) % 40)
                fields.append((name, value, (round + index) % 11 == 0))
            }
            let position = round % (fields.count + 1)
            var standInFields = fields
            standInFields.insert(("authorization", "-", false), at: position)
            var tokenFields = fields
            tokenFields.insert(("authorization", Self.firstToken, false), at: position)
            let flags = round % 3 == 0 ? HTTP2FrameLayout.endHeadersFlag | HTTP2FrameLayout.priorityFlag : HTTP2FrameLayout.endHeadersFlag
            let frame = Self.headersFrame(try withStandIn.deflate(standInFields), flags: flags)
            let expected = Self.headersFrame(try withToken.deflate(tokenFields), flags: flags)
            let (swapped, output) = Self.swapped(frame, swaps)
            #expect(swapped, "round \(round)")
            #expect(output == expected, "round \(round)")
        }
    }

    @Test func framesWithoutTheStandInAtABoundaryPassUnchanged() throws {
        let (swaps, field) = try Self.swaps(for: Self.firstToken)
        let standIn = field.standInEncoded
        // The stand-in's bytes inside another field's value: a literal `:path` that spells them.
        let inside: [UInt8] = [0x04, UInt8(standIn.count + 1), 0x2F] + standIn
        let frames: [[UInt8]] = [
            Self.headersFrame(inside),
            Self.headersFrame(standIn, flags: 0),  // no END_HEADERS: a CONTINUATION would follow
            Self.headersFrame(standIn, type: 0x00),  // DATA
            Self.headersFrame(standIn, type: 0x09),  // CONTINUATION
            Array(Self.headersFrame(standIn).dropLast()),  // shorter than its length says
            Self.headersFrame([0x04, 0x7F]),  // a length that runs past the block
            Self.headersFrame([0x1F] + [UInt8](repeating: 0xFF, count: 6)),  // an endless integer
            [0, 0, 2, 0x01, HTTP2FrameLayout.endHeadersFlag | HTTP2FrameLayout.paddedFlag, 0, 0, 0, 1, 200, 0x83],  // padding past the frame
            [0, 0, 0],
        ]
        for frame in frames {
            let (swapped, output) = Self.swapped(frame, swaps)
            #expect(!swapped)
            #expect(output == frame)
        }
    }
}

/// A delegate for connections whose answers the test does not read.
final class SilentDelegate: HTTP2ClientConnectionDelegate {
    func connectionDidBecomeReady(_ connection: HTTP2ClientConnection) {}
    func connection(_ connection: HTTP2ClientConnection, didFinishStream tag: UInt64,
                    result: Result<HTTP2Response, HTTP2StreamFailure>) {}
    func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {}
    func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String) {}
}

/// nghttp2's standalone HPACK encoder, one context across the blocks it writes.
private final class BlockDeflater {
    private let deflater: OpaquePointer

    init() throws {
        var deflater: OpaquePointer?
        guard nghttp2_hd_deflate_new(&deflater, 4096) == 0, let deflater else { throw DeflaterUnavailable() }
        self.deflater = deflater
    }

    deinit { nghttp2_hd_deflate_del(deflater) }

    struct DeflaterUnavailable: Error {}

    func changeTableSize(_ size: Int) {
        _ = nghttp2_hd_deflate_change_table_size(deflater, size)
    }

    /// The block of `fields`, in order (`neverIndexed`: NGHTTP2_NV_FLAG_NO_INDEX).
    func deflate(_ fields: [(name: String, value: String, neverIndexed: Bool)]) throws -> [UInt8] {
        // Every name and value in one buffer, so that each field points into it inside one closure.
        var text: [UInt8] = []
        var spans: [(name: Range<Int>, value: Range<Int>)] = []
        for field in fields {
            let nameStart = text.count
            text += field.name.utf8
            let valueStart = text.count
            text += field.value.utf8
            spans.append((nameStart..<valueStart, valueStart..<text.count))
        }
        var output = [UInt8](repeating: 0, count: 64 * 1024)
        let written = text.withUnsafeMutableBufferPointer { text -> Int in
            // invariant: every block has a field with a non-empty name, so the buffer has storage.
            let base = text.baseAddress!
            var list = zip(fields, spans).map { field, span in
                nghttp2_nv(name: base + span.name.lowerBound, value: base + span.value.lowerBound,
                           namelen: span.name.count, valuelen: span.value.count,
                           flags: UInt8((field.neverIndexed ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE).rawValue))
            }
            return output.withUnsafeMutableBufferPointer { nghttp2_hd_deflate_hd(deflater, $0.baseAddress, $0.count, &list, list.count) }
        }
        guard written > 0 else { throw DeflaterUnavailable() }
        return Array(output[..<written])
    }
}

/// Decodes the header blocks of a client's HEADERS frames with nghttp2's own HPACK decoder, as a
/// server would.
enum HeadersFrames {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Takes every frame `connection`'s session has to write, both as the session wrote it
    /// (`raw`) and as the connection sends it (`sent`, its stand-ins swapped).
    static func drain(_ connection: HTTP2ClientConnection, sent: inout [UInt8], raw: inout [UInt8]) {
        while let session = connection.session {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            guard count > 0, let chunk else { break }
            let frame = UnsafeBufferPointer(start: chunk, count: count)
            raw += frame
            connection.appendSentFrame(frame, to: &sent)
        }
    }

    /// Each HEADERS frame's fields (name to value), in order; nil when the bytes do not parse.
    static func decode(_ bytes: [UInt8]) -> [[String: String]]? {
        guard bytes.starts(with: preface) else { return nil }
        var inflater: OpaquePointer?
        guard nghttp2_hd_inflate_new(&inflater) == 0, let inflater else { return nil }
        defer { nghttp2_hd_inflate_del(inflater) }
        var blocks: [[String: String]] = []
        var position = preface.count
        while position + 9 <= bytes.count {
            let length = Int(bytes[position]) << 16 | Int(bytes[position + 1]) << 8 | Int(bytes[position + 2])
            let payload = (position + 9)..<(position + 9 + length)
            guard payload.upperBound <= bytes.count else { return nil }
            if bytes[position + 3] == 0x01 {
                guard let fields = inflate(Array(bytes[payload]), with: inflater) else { return nil }
                blocks.append(fields)
            }
            position = payload.upperBound
        }
        return position == bytes.count ? blocks : nil
    }

    private static func inflate(_ block: [UInt8], with inflater: OpaquePointer) -> [String: String]? {
        var fields: [String: String] = [:]
        let finished = block.withUnsafeBufferPointer { input -> Bool in
            guard var cursor = input.baseAddress else { return false }
            var left = input.count
            while true {
                var field = nghttp2_nv()
                var flags: Int32 = 0
                let used = nghttp2_hd_inflate_hd2(inflater, &field, &flags, cursor, left, 1)
                guard used >= 0 else { return false }
                cursor += used
                left -= used
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    let name = String(decoding: UnsafeBufferPointer(start: field.name, count: field.namelen), as: UTF8.self)
                    fields[name] = String(decoding: UnsafeBufferPointer(start: field.value, count: field.valuelen), as: UTF8.self)
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                    nghttp2_hd_inflate_end_headers(inflater)
                    return true
                }
                if used == 0 && left == 0 { return false }
            }
        }
        return finished ? fields : nil
    }
}
