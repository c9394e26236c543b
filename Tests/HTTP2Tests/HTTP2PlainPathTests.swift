import CNGHTTP2
@testable import HTTP2
import Testing

/// Request paths sent as plain HPACK literals: each HEADERS frame gets the path of its own
/// stream, a peer's HPACK decoder reads the same fields as from nghttp2's Huffman-coded ones, and
/// the token is on the wire as it is.
@Suite struct HTTP2PlainPathTests {
    /// A device token of `count` hex digits, different for each `number`.
    static func token(_ number: Int, count: Int = 64) -> String {
        let digits = String(number, radix: 16)
        return String(repeating: "c", count: count - digits.count) + digits
    }

    /// Submits one request as the APNs client does: the path through `addPath` (or, with
    /// `plain` false, through `add`, which nghttp2 Huffman-codes), the token encoded once.
    static func submit(_ tag: UInt64, token: String, plain: Bool, on connection: HTTP2ClientConnection) -> Bool {
        let byteCount = "/3/device/".utf8.count + token.utf8.count + HTTP2EncodedOnceFieldTests.firstToken.utf8.count
            + "alert".utf8.count
        return connection.submit(tag: tag, body: Array("{\"aps\":{}}".utf8), fieldCount: 3, byteCount: byteCount) { block in
            if plain { block.addPath("/3/device/", token) } else { block.add(":path", "/3/device/", token) }
            block.add("authorization", HTTP2EncodedOnceFieldTests.firstToken)
            block.add("apns-push-type", "alert")
        }
    }

    /// What a connection writes for `tokens` (one request each, in two batches), and what its
    /// session wrote before the swaps.
    static func written(tokens: [String], plain: Bool, loop: EventLoop,
                        tls: TLSClientContext) throws -> (sent: [UInt8], raw: [UInt8]) {
        let connection = try HTTP2ClientConnection.makeInMemory(loop: loop, tls: tls, delegate: SilentDelegate())
        var sent: [UInt8] = []
        var raw: [UInt8] = []
        func drain() { HeadersFrames.drain(connection, sent: &sent, raw: &raw) }
        drain()
        _ = connection.receiveInMemory(HTTP2ResponseReplay.serverHandshake)
        connection.encodeOnce("authorization", value: HTTP2EncodedOnceFieldTests.firstToken)
        let half = tokens.count / 2
        for (index, token) in tokens.enumerated() {
            #expect(submit(UInt64(index + 1), token: token, plain: plain, on: connection))
            if index + 1 == half { drain() }
        }
        drain()
        connection.close()
        return (sent, raw)
    }

    @Test func nghttp2WritesTheStandInAsThePathSwapExpects() {
        #expect(HTTP2PlainPath.deflaterAgrees)
    }

    @Test func eachFrameGetsItsOwnPathPlainAndAPeerDecodesTheSameFields() async throws {
        let loop = try EventLoop(name: "plain-path")
        defer { loop.shutdown() }
        let tls = try TLSClientContext(TLSClientConfiguration())
        // Tokens of 64 digits, and longer ones whose path length takes a second HPACK byte (127+).
        let tokens = (1...4).map { Self.token($0) } + (5...6).map { Self.token($0, count: 160) }
        let result = await onLoop(loop) {
            Result { (try Self.written(tokens: tokens, plain: true, loop: loop, tls: tls),
                      try Self.written(tokens: tokens, plain: false, loop: loop, tls: tls).sent) }
        }
        let (plain, huffman) = try result.get()
        // The session wrote the stand-in for every path...
        let raw = try #require(HeadersFrames.decode(plain.raw))
        #expect(raw.map { $0[":path"] } == Array(repeating: "-", count: tokens.count))
        // ...and a peer decodes each request's own path, with the other fields as nghttp2 wrote
        // them (one HPACK context across the blocks, the encoded-once token swapped in as well).
        let blocks = try #require(HeadersFrames.decode(plain.sent))
        #expect(blocks.map { $0[":path"] } == tokens.map { "/3/device/" + $0 })
        #expect(blocks.allSatisfy { $0["authorization"] == HTTP2EncodedOnceFieldTests.firstToken })
        #expect(try #require(HeadersFrames.decode(huffman)) == blocks)
        // On the wire the path is plain (H bit clear), so each token's digits are there as they
        // are; Huffman coding leaves none of them readable.
        for token in tokens {
            #expect(plain.sent.contains(subsequence: Array(("/3/device/" + token).utf8)))
            #expect(!huffman.contains(subsequence: Array(token.utf8)))
        }
    }

    @Test func aPathTooLongForTheSwapIsWrittenByNghttp2() async throws {
        let loop = try EventLoop(name: "plain-path-long")
        defer { loop.shutdown() }
        let tls = try TLSClientContext(TLSClientConfiguration())
        let long = Self.token(7, count: HTTP2PlainPath.maxBytes)  // with the prefix, past the limit
        let result = await onLoop(loop) { Result { try Self.written(tokens: [long, Self.token(8)], plain: true, loop: loop, tls: tls) } }
        let written = try result.get()
        let raw = try #require(HeadersFrames.decode(written.raw))
        #expect(raw.map { $0[":path"] } == ["/3/device/" + long, "-"])
        let blocks = try #require(HeadersFrames.decode(written.sent))
        #expect(blocks.map { $0[":path"] } == ["/3/device/" + long, "/3/device/" + Self.token(8)])
    }

    @Test func lengthsAreHPACKIntegersWithAClearHuffmanBit() {
        func encoded(_ length: Int) -> [UInt8] {
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 8) { scratch in
                let count = HTTP2PlainPath.writeLength(length, to: scratch.baseAddress!)
                return Array(scratch[..<count])
            }
        }
        #expect(encoded(0) == [0x00])
        #expect(encoded(74) == [0x4A])
        #expect(encoded(126) == [0x7E])
        #expect(encoded(127) == [0x7F, 0x00])
        #expect(encoded(128) == [0x7F, 0x01])
        #expect(encoded(254) == [0x7F, 0x7F])
        #expect(encoded(255) == [0x7F, 0x80, 0x01])
        #expect(encoded(1034) == [0x7F, 0x8B, 0x07])  // 1034 - 127 = 907 = 7 × 128 + 11
    }
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in the array as consecutive elements.
    func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        return (0...(count - needle.count)).contains { start in self[start..<(start + needle.count)].elementsEqual(needle) }
    }
}
