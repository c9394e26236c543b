import APNs
import Bridge
import Foundation
import Testing

/// Contract §5: a dead letter always fits the producer's `message.max.bytes`.
@Suite struct DeadLetterFittingTests {
    static let source = RecordSource(topic: "apns.requests", partition: 0, offset: 42)
    static let deadLetter = DeadLetter(code: .invalidJSON, detail: "line 1, column 1: unexpected character")

    func encode(_ original: [UInt8]?, maximumBytes: Int) throws -> (bytes: [UInt8], object: [String: Any]) {
        var buffer: [UInt8] = []
        ResultRecordEncoder.appendDeadLetter(Self.deadLetter, source: Self.source, original: original,
                                             maximumBytes: maximumBytes, to: &buffer)
        let parsed = try JSONSerialization.jsonObject(with: Data(buffer))
        return (buffer, try #require(parsed as? [String: Any]))
    }

    @Test func controlCharactersEscapedSixFoldAreCutToFit() throws {
        let original = [UInt8](repeating: 0x01, count: 200_000)
        let (bytes, object) = try encode(original, maximumBytes: 100_000)
        #expect(bytes.count <= 100_000)
        #expect(bytes.count > 99_000)  // cut to fit, not emptied
        #expect(object["original_truncated"] as? Bool == true)
        #expect(object["original_size"] as? Int == 200_000)
        #expect(object["original_encoding"] as? String == "utf8")
        let kept = try #require(object["original"] as? String)
        #expect(!kept.isEmpty && kept.unicodeScalars.allSatisfy { $0 == "\u{01}" })
    }

    @Test func aValueThatFitsIsWrittenWholeWithoutTruncationFields() throws {
        let original = Array(#"{"tokens": 1}"#.utf8)
        let (_, object) = try encode(original, maximumBytes: 1_000)
        #expect(object["original"] as? String == #"{"tokens": 1}"#)
        #expect(object["original_truncated"] == nil)
        #expect(object["original_size"] == nil)
    }

    @Test func multiByteCharactersAreNeverSplit() throws {
        let original = Array(String(repeating: "😀é☕", count: 50_000).utf8)
        for limit in [1_000, 1_001, 1_002, 1_003, 1_004, 1_005] {
            let (bytes, object) = try encode(original, maximumBytes: limit)
            #expect(bytes.count <= limit)
            let kept = try #require(object["original"] as? String)
            #expect(String(repeating: "😀é☕", count: 50_000).hasPrefix(kept))
            #expect(object["original_size"] as? Int == original.count)
        }
    }

    @Test func invalidUTF8IsCutInBase64() throws {
        var original = [UInt8](repeating: 0xFF, count: 700_000)
        original[0] = 0x41
        let (bytes, object) = try encode(original, maximumBytes: 300_000)
        #expect(bytes.count <= 300_000)
        #expect(object["original_encoding"] as? String == "base64")
        #expect(object["original_truncated"] as? Bool == true)
        #expect(object["original_size"] as? Int == 700_000)
        let text = try #require(object["original"] as? String)
        let kept = try #require(Data(base64Encoded: text))
        #expect(kept.count > 200_000)
        #expect(Array(kept) == Array(original.prefix(kept.count)))
    }

    @Test func aTombstoneStaysNull() throws {
        let (_, object) = try encode(nil, maximumBytes: 200)
        #expect(object["original"] is NSNull)
        #expect(object["original_encoding"] is NSNull)
    }
}
