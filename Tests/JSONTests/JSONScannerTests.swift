@testable import JSON
import Testing

@Suite struct JSONScannerTests {
    func parse(_ text: String) throws(JSONError) -> JSONDocument {
        try JSONScanner.parse(Array(text.utf8))
    }

    func error(_ bytes: [UInt8]) -> JSONError? {
        do {
            _ = try JSONScanner.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    func error(_ text: String) -> JSONError? { error(Array(text.utf8)) }

    @Test func validCorpus() throws {
        let corpus = [
            "{}", "[]", "0", "-0", "1", "-1.5e10", "1E+2", "1e-2", "0.000001", "123456789012345678901234567890",
            "true", "false", "null", "\"\"", "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "\"\\u0000\\u001F\\uFFFF\"",
            "\"\\ud83d\\ude00\"", " \t\r\n{ \"a\" : [ 1 , 2 , { \"b\" : null } ] } \n",
            "{\"a\":{\"b\":{\"c\":[[[]]]}}}", "[\"é\", \"☕\", \"😀\", \"\u{10FFFF}\"]",
            "{\"a\":1,\"a\":2}",  // duplicate names are the caller's business
        ]
        for text in corpus {
            #expect(throws: Never.self, "\(text)") { _ = try parse(text) }
        }
    }

    @Test func invalidCorpus() {
        let corpus = [
            "", " ", "{", "}", "[", "]", "[1,]", "[,1]", "{\"a\":1,}", "{\"a\"}", "{\"a\" 1}", "{a:1}", "{'a':1}",
            "[01]", "[-]", "[1.]", "[.5]", "[1e]", "[1e+]", "[+1]", "[0x10]", "[NaN]", "[Infinity]", "[-Infinity]",
            "tru", "nul", "True", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"a\tb\"", "\"a\nb\"",
            "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"\\ud83dx\"", "[1] [2]", "{} x", "1 2",
            "\u{FEFF}{}", "[1,,2]", "{\"a\":1 \"b\":2}", "//c\n{}", "/*c*/{}",
        ]
        for text in corpus {
            #expect(error(text) != nil, "\(text.debugDescription) should be rejected")
        }
    }

    @Test func utf8EdgeCases() {
        let valid: [[UInt8]] = [
            [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80],
            [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
        ]
        let invalid: [[UInt8]] = [
            [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF],               // continuation as lead, overlong 2-byte
            [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF],                   // overlong 3-byte
            [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],                   // encoded surrogates
            [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF],       // overlong 4-byte
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], // above U+10FFFF
            [0xC2], [0xE1, 0x80], [0xF1, 0x80, 0x80],                 // truncated
            [0xC2, 0x41], [0xE1, 0x80, 0x41],                         // bad continuation
        ]
        for sequence in valid {
            let document = try? JSONScanner.parse([UInt8(ascii: "\"")] + sequence + [UInt8(ascii: "\"")])
            #expect(document?.root.stringValue == String(decoding: sequence, as: UTF8.self), "\(sequence)")
        }
        for sequence in invalid {
            let input = Array("{\"k\": \"ab".utf8) + sequence + Array("\"}".utf8)
            let found = error(input)
            #expect(found?.kind == .invalidUTF8, "\(sequence)")
            #expect(found?.byteOffset == 9, "\(sequence)")
            #expect(found?.description == "invalid UTF-8 at byte 9", "\(sequence)")
        }
        // Malformed bytes where a value is expected are reported as UTF-8 errors too.
        #expect(error([UInt8(ascii: "["), 0xFF, UInt8(ascii: "]")])?.kind == .invalidUTF8)
        // Well-formed non-ASCII outside a string is a syntax error.
        #expect(error("[é]")?.kind == .syntax)
    }

    @Test func errorsCarryLineAndCharacterColumn() throws {
        let found = try #require(error("{\n  \"a\": 1,\n  \"b\": ☕x\n}"))
        #expect(found.line == 3)
        #expect(found.column == 8)  // 1-based, ☕ counts as one character
        #expect(found.description.hasPrefix("line 3, column 8: expected a value but found "))
        let end = try #require(error("{\"a\": [1, 2"))
        #expect(end.line == 1)
        #expect(end.column == 12)
        #expect(end.message.contains("end of input"))
        let escape = try #require(error("\"\\ud800\""))
        #expect(escape.message.contains("unpaired high surrogate"))
        #expect(escape.column == 2)
    }

    /// A push request's tape stays under glibc's small-chunk size (1,008 bytes), so parsing one
    /// never takes the allocator's large-chunk path (which consolidates its free lists).
    @Test func aRequestsTapeIsASmallAllocation() throws {
        #expect(MemoryLayout<JSONNode>.stride == 20)
        let payload = #"{"aps":{"alert":{"title":"Hello","body":"Your order has shipped"},"sound":"default"}}"#
        let request = #"{"id":"order-1234567","app":"chat","token":"\#(String(repeating: "ab", count: 32))","payload":"# + payload + "}"
        let document = try parse(request)
        #expect(document.nodes.capacity * MemoryLayout<JSONNode>.stride <= 1_008)
        #expect(document.root["payload"]?["aps"]?["sound"]?.stringValue == "default")
        #expect(document.root["payload"].map { Array($0.rawBytes) } == Array(payload.utf8))
    }

    /// Strings are scanned eight bytes at a time while they hold plain ASCII: whatever byte needs
    /// attention, at any position of a word or the tail, is still found.
    @Test func everyStringBytePositionIsChecked() throws {
        for position in 0..<19 {
            func string(_ inner: [UInt8]) -> [UInt8] {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: 19)
                bytes.replaceSubrange(position..<position + 1, with: inner)
                return [UInt8(ascii: "\"")] + bytes + [UInt8(ascii: "\"")]
            }
            #expect(error(string([0x01]))?.message.contains("control character") == true, "position \(position)")
            #expect(error(string([0xFF]))?.kind == .invalidUTF8, "position \(position)")
            #expect(error(string([0xC3]))?.kind == .invalidUTF8, "position \(position)")
            #expect(error(string([UInt8(ascii: "\"")])) != nil, "position \(position)")
            let accented = try JSONScanner.parse(string(Array("é".utf8)))
            #expect(accented.root.stringValue == String(repeating: "a", count: position) + "é" + String(repeating: "a", count: 18 - position))
            let escaped = try JSONScanner.parse(string(Array("\\n".utf8)))
            #expect(escaped.root.stringValue == String(repeating: "a", count: position) + "\n" + String(repeating: "a", count: 18 - position))
        }
    }

    @Test func depthLimit() {
        let ok = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(error(ok) == nil)
        let deep = String(repeating: "[", count: 101) + String(repeating: "]", count: 101)
        #expect(error(deep)?.kind == .tooDeep)
        let objects = String(repeating: "{\"a\":", count: 101) + "1" + String(repeating: "}", count: 101)
        #expect(error(objects)?.kind == .tooDeep)
        let huge = String(repeating: "[", count: 1_000_000)
        #expect(error(huge)?.kind == .tooDeep)
    }

    @Test func rawRangesAndAccessors() throws {
        let text = "{ \"id\" : \"x\\n\\u00e9\\ud83d\\ude00\", \"payload\" : {\"aps\": {\"alert\" : \"hi\"}} , \"n\": -42, \"f\": 1.5,"
            + " \"big\": 9223372036854775808, \"min\": -9223372036854775808, \"t\": true, \"z\": null, \"list\": [1, [2], {}] }"
        let document = try parse(text)
        let root = document.root
        #expect(root.kind == .object)
        #expect(root.count == 9)
        #expect(root.rawRange == 0..<text.utf8.count)
        #expect(root["id"]?.stringValue == "x\né😀")
        let payload = try #require(root["payload"])
        #expect(String(decoding: payload.rawBytes, as: UTF8.self) == "{\"aps\": {\"alert\" : \"hi\"}}")
        #expect(payload["aps"]?["alert"]?.stringValue == "hi")
        #expect(root["n"]?.int64Value == -42)
        #expect(root["f"]?.int64Value == nil)
        #expect(root["f"]?.numberText == "1.5")
        #expect(root["big"]?.int64Value == nil)
        #expect(root["min"]?.int64Value == Int64.min)
        #expect(root["t"]?.boolValue == true)
        #expect(root["z"]?.isNull == true)
        #expect(root["missing"] == nil)
        let list = try #require(root["list"])
        #expect(list.elements.map(\.kind) == [.number, .array, .object])
        #expect(list.elements.map { String(decoding: $0.rawBytes, as: UTF8.self) } == ["1", "[2]", "{}"])
        #expect(root.members.map { $0.key.stringValue ?? "?" } == ["id", "payload", "n", "f", "big", "min", "t", "z", "list"])
        #expect(list.members.map { _ in 0 }.isEmpty)
        #expect(root.elements.map { _ in 0 }.isEmpty)
        #expect(root["id"]?.int64Value == nil)
        #expect(root["n"]?.stringValue == nil)
    }
}
