import APNs
import Bridge
import Foundation
import Testing

@Suite struct ResultRecordEncoderTests {
    static let source = RecordSource(topic: "apns.requests", partition: 3, offset: 1234)
    static let hostile = "q\"b\\s/\n\r\t\u{01}\u{1F}\u{7F} é ☕ 😀 \u{2028}</script>"

    func object(_ bytes: [UInt8]) throws -> [String: Any] {
        let parsed = try JSONSerialization.jsonObject(with: Data(bytes))
        return try #require(parsed as? [String: Any])
    }

    func isNull(_ value: Any?) -> Bool { value is NSNull }

    @Test func resultWithEveryFieldSet() throws {
        let result = PushResult(requestID: Self.hostile, app: "chat", token: "a1b2", outcome: .rejected, status: 410,
                                reason: "Unregistered", apnsID: "0E9C", apnsUniqueID: "u-1", unregisteredAt: 1_700_000_000_000,
                                attempts: 2, latencyMilliseconds: 18.44, source: Self.source,
                                completedAtMilliseconds: 1_795_996_799_123)
        var buffer: [UInt8] = Array("prefix".utf8)
        buffer.removeAll(keepingCapacity: true)
        ResultRecordEncoder.appendResult(result, to: &buffer)
        let json = try object(buffer)
        #expect(json["request_id"] as? String == Self.hostile)
        #expect(json["app"] as? String == "chat")
        #expect(json["token"] as? String == "a1b2")
        #expect(json["outcome"] as? String == "rejected")
        #expect((json["status"] as? NSNumber)?.intValue == 410)
        #expect(json["reason"] as? String == "Unregistered")
        #expect(json["apns_id"] as? String == "0E9C")
        #expect(json["apns_unique_id"] as? String == "u-1")
        #expect((json["unregistered_at"] as? NSNumber)?.int64Value == 1_700_000_000_000)
        #expect((json["attempts"] as? NSNumber)?.intValue == 2)
        #expect((json["latency_ms"] as? NSNumber)?.doubleValue == 18.4)
        let source = try #require(json["source"] as? [String: Any])
        #expect(source["topic"] as? String == "apns.requests")
        #expect((source["partition"] as? NSNumber)?.intValue == 3)
        #expect((source["offset"] as? NSNumber)?.int64Value == 1234)
        #expect(json["completed_at"] as? String == "2026-11-29T23:59:59.123Z")
        #expect(json.count == 13)
        #expect(String(decoding: buffer, as: UTF8.self).contains("\"latency_ms\":18.4,"))
    }

    @Test func resultWithNullsAndOutcomes() throws {
        for outcome in PushOutcome.allCases {
            let result = PushResult(requestID: "r", app: "a", token: "t", outcome: outcome, attempts: 0,
                                    latencyMilliseconds: 0, source: RecordSource(topic: "t", partition: 0, offset: 0),
                                    completedAtMilliseconds: 0)
            var buffer: [UInt8] = []
            ResultRecordEncoder.appendResult(result, to: &buffer)
            let json = try object(buffer)
            #expect(json["outcome"] as? String == outcome.rawValue)
            for key in ["status", "reason", "apns_id", "apns_unique_id", "unregistered_at"] {
                #expect(isNull(json[key]), "\(key)")
            }
            #expect(json["completed_at"] as? String == "1970-01-01T00:00:00.000Z")
            #expect(String(decoding: buffer, as: UTF8.self).contains("\"latency_ms\":0.0,"))
        }
    }

    @Test func aResultLongerThanTheFirstAttemptIsWrittenWhole() throws {
        // Strings of escapes well past the first attempt's room (1 KiB of stack), in each quoted field.
        let room = 1024
        let long = String(repeating: "\"\u{01}", count: room)
        let result = PushResult(requestID: long, app: "a", token: long, outcome: .rejected, status: 400, reason: long,
                                apnsID: long, apnsUniqueID: long, attempts: 1, latencyMilliseconds: 1,
                                source: RecordSource(topic: long, partition: 0, offset: 0), completedAtMilliseconds: 0)
        var buffer: [UInt8] = []
        ResultRecordEncoder.appendResult(result, to: &buffer)
        #expect(buffer.count > 6 * 8 * room)
        let json = try object(buffer)
        for key in ["request_id", "token", "reason", "apns_id", "apns_unique_id"] {
            #expect(json[key] as? String == long, "\(key)")
        }
        #expect((json["source"] as? [String: Any])?["topic"] as? String == long)
        #expect(json["completed_at"] as? String == "1970-01-01T00:00:00.000Z")
    }

    @Test func latencyAndIntegerFormatting() throws {
        let cases: [(Double, String)] = [
            (0, "0.0"), (0.04, "0.0"), (0.05, "0.1"), (18.44, "18.4"), (18.45, "18.5"), (1234567.89, "1234567.9"),
            (-2.26, "-2.3"), (.nan, "0.0"), (.infinity, "0.0"), (99.96, "100.0"),
        ]
        for (value, text) in cases {
            let result = PushResult(requestID: "r", app: "a", token: "t", outcome: .delivered, status: 200, attempts: 1,
                                    latencyMilliseconds: value,
                                    source: RecordSource(topic: "t", partition: Int32.max, offset: Int64.max),
                                    completedAtMilliseconds: 0)
            var buffer: [UInt8] = []
            ResultRecordEncoder.appendResult(result, to: &buffer)
            let string = String(decoding: buffer, as: UTF8.self)
            #expect(string.contains("\"latency_ms\":\(text),"), "\(value) → \(string)")
            #expect(string.contains("\"partition\":2147483647,\"offset\":9223372036854775807}"))
            _ = try object(buffer)
        }
    }

    @Test func invalidTokenRecord() throws {
        let record = InvalidTokenRecord(token: Self.hostile, app: "chat", topic: "com.example.chat", environment: .sandbox,
                                        reason: "Unregistered", unregisteredAt: -5, requestID: "chat-7781",
                                        observedAtMilliseconds: 1_795_996_799_123)
        var buffer: [UInt8] = []
        ResultRecordEncoder.appendInvalidToken(record, to: &buffer)
        let json = try object(buffer)
        #expect(json["token"] as? String == Self.hostile)
        #expect(json["app"] as? String == "chat")
        #expect(json["topic"] as? String == "com.example.chat")
        #expect(json["environment"] as? String == "sandbox")
        #expect(json["reason"] as? String == "Unregistered")
        #expect((json["unregistered_at"] as? NSNumber)?.int64Value == -5)
        #expect(json["request_id"] as? String == "chat-7781")
        #expect(json["observed_at"] as? String == "2026-11-29T23:59:59.123Z")
        #expect(json.count == 8)

        var second: [UInt8] = []
        ResultRecordEncoder.appendInvalidToken(InvalidTokenRecord(token: "x", app: "a", topic: "t", environment: .production,
                                                                  reason: "BadDeviceToken", requestID: "r",
                                                                  observedAtMilliseconds: 0), to: &second)
        #expect(isNull(try object(second)["unregistered_at"]))
        #expect(try object(second)["environment"] as? String == "production")
    }

    @Test func deadLetterWithUTF8Original() throws {
        let original = Array("{\"token\": oops, \"x\": \"é\\n\"}\n".utf8)
        var buffer: [UInt8] = []
        ResultRecordEncoder.appendDeadLetter(DeadLetter(code: .invalidJSON, detail: "line 1, column 11: \(Self.hostile)"),
                                             source: Self.source, original: original, to: &buffer)
        let json = try object(buffer)
        #expect(json["error"] as? String == "invalid_json")
        #expect(json["detail"] as? String == "line 1, column 11: \(Self.hostile)")
        let source = try #require(json["source"] as? [String: Any])
        #expect(source["topic"] as? String == "apns.requests")
        #expect((source["partition"] as? NSNumber)?.intValue == 3)
        #expect((source["offset"] as? NSNumber)?.int64Value == 1234)
        #expect(json["original"] as? String == String(decoding: original, as: UTF8.self))
        #expect(json["original_encoding"] as? String == "utf8")
        #expect(json.count == 5)
    }

    @Test func deadLetterWithBinaryOriginalUsesBase64() throws {
        for length in 0..<8 {
            let original: [UInt8] = [0xFF, 0x00, 0xC3, 0x28, 0x80, 0x7F, 0xED, 0xA0].prefix(length) + [0xFE]
            var buffer: [UInt8] = []
            ResultRecordEncoder.appendDeadLetter(DeadLetter(code: .invalidJSON, detail: "invalid UTF-8 at byte 0"),
                                                 source: Self.source, original: original, to: &buffer)
            let json = try object(buffer)
            #expect(json["original_encoding"] as? String == "base64")
            #expect(json["original"] as? String == Data(original).base64EncodedString())
        }
    }

    @Test func deadLetterWithNullOriginal() throws {
        var buffer: [UInt8] = []
        ResultRecordEncoder.appendDeadLetter(DeadLetter(code: .invalidRequest, detail: "the record has no value (null)"),
                                             source: Self.source, original: nil, to: &buffer)
        let json = try object(buffer)
        #expect(json["error"] as? String == "invalid_request")
        #expect(isNull(json["original"]))
        #expect(isNull(json["original_encoding"]))
    }

    @Test func appendsToAReusedBuffer() throws {
        var buffer: [UInt8] = []
        let result = PushResult(requestID: "r", app: "a", token: "t", outcome: .delivered, status: 200, attempts: 1,
                                latencyMilliseconds: 1, source: Self.source, completedAtMilliseconds: 0)
        ResultRecordEncoder.appendResult(result, to: &buffer)
        let first = buffer
        buffer.removeAll(keepingCapacity: true)
        ResultRecordEncoder.appendResult(result, to: &buffer)
        #expect(buffer == first)
        ResultRecordEncoder.appendResult(result, to: &buffer)
        #expect(buffer == first + first)
    }
}
