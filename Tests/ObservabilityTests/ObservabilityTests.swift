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

    @Test func levelsParseTheirConfigurationNames() {
        #expect(Logger.Level(name: "warning") == .warning)
        #expect(Logger.Level(name: "verbose") == nil)
        #expect(Logger.Level.trace < Logger.Level.error)
    }
}
