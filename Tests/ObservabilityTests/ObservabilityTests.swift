import Foundation
import Observability
import Testing

@Suite struct ObservabilityTests {
    @Test func deviceTokensAreShortenedToTheirFirstEightDigits() {
        let token = String(repeating: "a1", count: 32)
        #expect(Redact.token(token) == "a1a1a1a1…")
        #expect(!Redact.token(token).contains(token))
        #expect(Redact.token("abc") == "abc")
    }

    @Test func timestampsAreISO8601WithMilliseconds() {
        #expect(Timestamp.iso8601(0) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.iso8601(1_700_000_000_123) == "2023-11-14T22:13:20.123Z")
        #expect(Timestamp.iso8601(1_700_000_000_005) == "2023-11-14T22:13:20.005Z")
        #expect(Timestamp.iso8601(253_402_300_799_999) == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp.iso8601(-1) == "1969-12-31T23:59:59.999Z")
        #expect(Timestamp.iso8601(951_782_400_000) == "2000-02-29T00:00:00.000Z")
        #expect(Timestamp.iso8601(4_107_542_400_000) == "2100-03-01T00:00:00.000Z")
        #expect(Timestamp.iso8601(-62_135_596_800_000) == "0001-01-01T00:00:00.000Z")
        // The edges of the fixed 24-byte form (years 0–9999) and the first year past it.
        #expect(Timestamp.iso8601(-62_167_219_200_000) == "0000-01-01T00:00:00.000Z")
        #expect(Timestamp.iso8601(253_402_300_800_000) == "10000-01-01T00:00:00.000Z")
        #expect(Timestamp.iso8601(1_764_547_199_909) == "2025-11-30T23:59:59.909Z")
    }

    /// The arithmetic calendar agrees with glibc's `gmtime_r` from year 1 to 9999, leap days and
    /// centuries included (one sample every ~23 days and 3 seconds, plus each day around 1970).
    @Test func iso8601AgreesWithGmtime() {
        var failures = 0
        var seconds: Int64 = -62_135_596_800
        while seconds < 253_402_300_800, failures < 5 {
            let milliseconds = seconds * 1000 + (seconds & 0x3ff) % 1000
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            let expected = String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900,
                                  Int(parts.tm_mon) + 1, Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min),
                                  Int(parts.tm_sec), Int(milliseconds - seconds * 1000))
            let actual = Timestamp.iso8601(milliseconds)
            if actual != expected {
                failures += 1
                Issue.record("\(milliseconds): \(actual), gmtime_r says \(expected)")
            }
            seconds += abs(seconds) < 400 * 86_400 ? 86_399 : 2_000_003
        }
        let now = Timestamp.nowMilliseconds()
        #expect(Timestamp.nowMicroseconds() / 1000 >= now)
    }

    @Test func jsonStringsAreEscapedInBothForms() {
        let hostile = "q\"b\\n\nr\rt\t\u{01}é"
        var text = ""
        JSONText.appendQuoted(hostile, to: &text)
        #expect(text == #""q\"b\\n\nr\rt\t\u0001é""#)
        var bytes: [UInt8] = []
        JSONText.appendQuoted(hostile, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == text)
        // Escapes at either end, next to each other, and plain runs (copied whole) between them.
        for value in ["\"start", "end\\", "\u{1f}\u{1f}", "plain token 0123abcd", "", "a\"b\"c", "\(Character(UnicodeScalar(0x7f)))🙂"] {
            var expectedText = ""
            JSONText.appendQuoted(value, to: &expectedText)
            var appended: [UInt8] = Array("x".utf8)
            JSONText.appendQuoted(value, to: &appended)
            #expect(String(decoding: appended, as: UTF8.self) == "x" + expectedText)
        }
    }

    @Test func byteWriterBoundsHoldForTheLargestValues() {
        var bytes: [UInt8] = Array("kept".utf8)
        for value in [Int64.min, Int64.max, 0, -1, 9, 10] {
            bytes.appendWriting(maxBytes: ByteWriter.integerMaxBytes) { $0.writeInteger(value) }
            bytes.append(UInt8(ascii: " "))
        }
        bytes.appendWriting(maxBytes: ByteWriter.integerMaxBytes) { $0.writeUnsigned(.max) }
        #expect(String(decoding: bytes, as: UTF8.self)
            == "kept-9223372036854775808 9223372036854775807 0 -1 9 10 18446744073709551615")
        // Every byte a six-byte escape: the bound is exact, and nothing past it is kept.
        let controls = String(decoding: [UInt8](repeating: 0x01, count: 50), as: UTF8.self)
        var quoted: [UInt8] = []
        quoted.appendWriting(maxBytes: ByteWriter.quotedMaxBytes(controls)) { $0.writeQuoted(controls) }
        #expect(quoted.count == ByteWriter.quotedMaxBytes(controls))
        var unused: [UInt8] = [1, 2]
        unused.appendWriting(maxBytes: 100) { $0.write("ab") }
        #expect(unused == [1, 2, UInt8(ascii: "a"), UInt8(ascii: "b")])
        // An empty array grows by what was written, not by the bound.
        var small: [UInt8] = []
        small.appendWriting(maxBytes: 4_000) { $0.write("a short record") }
        #expect(small.count == 14 && small.capacity < 100)
        // The farthest times a millisecond Int64 can name fit the timestamp's bound.
        #expect(Timestamp.iso8601(.max).hasSuffix(".807Z"))
        #expect(Timestamp.iso8601(.min).hasPrefix("0000-"))
    }

    @Test func aFirstAttemptThatOverflowsIsWrittenAgainWithTheExactBound() {
        // Within the first attempt: the exact bound is never computed.
        var boundAsked = 0
        var written: [UInt8] = []
        ByteWriter.withWritten(trying: { $0.write("short"); $0.writeInteger(-42) },
                               maxBytes: { boundAsked += 1; return 100 }, use: { written = Array($0) })
        #expect(String(decoding: written, as: UTF8.self) == "short-42" && boundAsked == 0)
        // Past it, each kind of write at the point of overflow: the second run writes everything once.
        let long = String(repeating: "\u{01}", count: ByteWriter.firstAttemptBytes / 6 + 1)
        let bodies: [(String, (inout ByteWriter) -> Void)] = [
            ("quoted", { $0.write("["); $0.writeQuoted(long); $0.write("]") }),
            ("literals", { for _ in 0..<ByteWriter.firstAttemptBytes / 4 + 1 { $0.write("abcd") }; $0.writeUnsigned(7) }),
            ("bytes", { for _ in 0..<ByteWriter.firstAttemptBytes + 1 { $0.write(UInt8(ascii: "x")) }; $0.writeISO8601(0) }),
        ]
        for (name, body) in bodies {
            var expected: [UInt8] = []
            expected.appendWriting(maxBytes: 20_000, body)
            boundAsked = 0
            ByteWriter.withWritten(trying: body, maxBytes: { boundAsked += 1; return expected.count }, use: { written = Array($0) })
            #expect(written == expected && boundAsked == 1 && expected.count > ByteWriter.firstAttemptBytes, "\(name)")
        }
    }

    @Test func quotedBytesIsExactlyWhatWriteQuotedWrites() {
        let samples = ["", "plain-token-0123", "quote\"back\\slash", "line\nfeed\r\t", "\u{01}\u{1F}\u{7F}", "é日本🙂",
                       String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)]
        // Every byte value at every position of the eight-byte words and the tail.
        var placed: [String] = []
        for byte in [0x00, 0x09, 0x0A, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F] as [UInt8] {
            for position in 0..<19 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 19)
                bytes[position] = byte
                placed.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        for sample in samples + placed {
            var written: [UInt8] = []
            written.appendWriting(maxBytes: ByteWriter.quotedMaxBytes(sample)) { $0.writeQuoted(sample) }
            #expect(written == Self.referenceQuoted(sample), "\(sample.debugDescription)")
            #expect(ByteWriter.quotedBytes(sample) == written.count, "\(sample.debugDescription)")
        }
    }

    /// JSON string escaping byte by byte, the plain way.
    private static func referenceQuoted(_ text: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += Array("\\\"".utf8)
            case UInt8(ascii: "\\"): out += Array("\\\\".utf8)
            case 0x0A: out += Array("\\n".utf8)
            case 0x0D: out += Array("\\r".utf8)
            case 0x09: out += Array("\\t".utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        return out + [UInt8(ascii: "\"")]
    }

    @Test func byteScanEqualsMatchesWholeSpellingsOnly() {
        func equals(_ text: String, _ name: StaticString) -> Bool {
            Array(text.utf8).withUnsafeBufferPointer { ByteScan.equals($0, name) }
        }
        #expect(equals(":status", ":status"))
        #expect(!equals(":statu", ":status"))
        #expect(!equals(":statuss", ":status"))
        #expect(!equals(":Status", ":status"))
        #expect(!equals(":statuS", ":status"))
        #expect(equals("", ""))
        #expect(!equals("", "a"))
        #expect(ByteScan.equals(UnsafeBufferPointer(start: nil, count: 0), ""))
    }

    /// The word-at-a-time search finds the same byte as a byte-by-byte one: every byte value at
    /// every position of two words and a tail, after every start, and pairs of bytes in one word
    /// (a borrow from the lower one must not hide or invent the first).
    @Test func firstAttentionByteMatchesAByteByByteSearch() {
        func reference(_ bytes: [UInt8], from start: Int, nonASCII: Bool) -> Int {
            var index = start
            while index < bytes.count {
                let byte = bytes[index]
                if byte < 0x20 || byte == 0x22 || byte == 0x5C || (nonASCII && byte >= 0x80) { return index }
                index += 1
            }
            return index
        }
        func check(_ bytes: [UInt8]) {
            bytes.withUnsafeBufferPointer { buffer in
                for start in 0...bytes.count {
                    for nonASCII in [false, true] {
                        let found = ByteScan.firstAttentionByte(in: buffer, from: start, stoppingAtNonASCII: nonASCII)
                        #expect(found == reference(bytes, from: start, nonASCII: nonASCII), "\(bytes) from \(start)")
                    }
                }
            }
        }
        for value in 0...255 {
            for position in 0..<19 {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 19)
                bytes[position] = UInt8(value)
                check(bytes)
            }
        }
        let edges: [UInt8] = [0x00, 0x01, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xA2, 0xDC, 0xFF]
        for low in edges {
            for high in edges {
                for (first, second) in [(2, 3), (0, 7), (5, 6)] {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 16)
                    bytes[first] = low
                    bytes[second] = high
                    check(bytes)
                }
            }
        }
        check([])
        #expect(ByteScan.firstAttentionByte(in: UnsafeBufferPointer(start: nil, count: 0), from: 0, stoppingAtNonASCII: true) == 0)
    }

    @Test func levelsParseTheirConfigurationNames() {
        #expect(Logger.Level(name: "warning") == .warning)
        #expect(Logger.Level(name: "verbose") == nil)
        #expect(Logger.Level.trace < Logger.Level.error)
    }
}
