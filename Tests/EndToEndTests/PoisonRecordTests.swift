import APNs
import Bridge
import BridgeLocal
import Foundation
import JSON
import Kafka
import Observability
import TestSupport
import Testing

/// Contract §3 and §5: no record stops the bridge. Records built to break a consumer go to the
/// real `apns-bridge run` process; each yields exactly one dead letter (or its results, where it
/// is a valid request), the process never exits, everything after them is delivered, and every
/// offset ends committed.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct PoisonRecordTests {
    enum Expected {
        case deadLetter(code: String, truncated: Bool = false, dropped: Dropped = .nothing)
        case results(count: Int, latencyIsNull: Bool)
    }

    /// What a dead letter leaves out of the original record so that its value keeps room under
    /// the producer's limit: the original headers first, then the key.
    enum Dropped {
        case nothing, headers, headersAndKey
    }

    struct Record {
        var key: [UInt8]?
        var value: [UInt8]?
        var headers: [KafkaHeader] = []
        var timestamp: Int64?
        var expected: Expected
    }

    /// A header named `name`.
    static func header(_ name: String, _ value: [UInt8]?) -> KafkaHeader {
        KafkaHeader(name: name, value: value)
    }

    /// Header names that are not UTF-8: an overlong encoding, a lone continuation byte, Latin-1.
    static let namesNotUTF8: [[UInt8]] = [[0xC0, 0xAF], [0x78, 0x80, 0x79], Array("caf".utf8) + [0xE9]]

    /// The value of the record whose header names are `namesNotUTF8`.
    static let namesNotUTF8Value = Array("not json, odd header names".utf8)

    /// The bytes of `header`'s name.
    static func nameBytes(_ header: KafkaHeader) -> [UInt8] {
        header.withNameBytes { Array($0) }
    }

    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    /// The `id` of a JSON object value when it is a valid request id (1 to 256 characters).
    static func validID(in value: [UInt8]?) -> String? {
        guard let value, let document = try? JSONScanner.parse(value),
              let id = document.root["id"]?.stringValue, (1...256).contains(id.count) else { return nil }
        return id
    }

    static func request(_ index: Int, extra: String = "") -> [UInt8] {
        Array(#"{"id":"req-\#(index)","token":"\#(token(index))","payload":{"aps":{"alert":"x"}}\#(extra)}"#.utf8)
    }

    static var records: [Record] {
        let allBytes = (0...255).map { UInt8($0) }
        let tooManyTokens = (0..<10_500).map { "\"\(token($0 + 100_000))\"" }.joined(separator: ",")
        var records: [Record] = [
            Record(value: request(0), expected: .results(count: 1, latencyIsNull: false)),
            // Timestamps: year 9999, 1 ms after the epoch, negative, far beyond any calendar.
            Record(value: request(1), timestamp: 253_402_300_799_000, expected: .results(count: 1, latencyIsNull: true)),
            Record(value: request(2), timestamp: 1, expected: .results(count: 1, latencyIsNull: true)),
            Record(value: request(3), timestamp: -5, expected: .results(count: 1, latencyIsNull: true)),
            Record(value: request(4), timestamp: 9_000_000_000_000_000_000, expected: .results(count: 1, latencyIsNull: true)),
            // Keys and headers of arbitrary bytes, on a valid request and on a bad one.
            Record(key: allBytes, value: request(5), headers: [header("x-bin", allBytes), header("request-id", [0xFF, 0x00, 0xC3])],
                   expected: .results(count: 1, latencyIsNull: false)),
            Record(key: allBytes, value: Array("not json".utf8), headers: [header("x-bin", allBytes), header("", [])],
                   expected: .deadLetter(code: "invalid_json")),
            // Header names that are not UTF-8 are repeated byte for byte, not repaired.
            Record(value: namesNotUTF8Value,
                   headers: zip(namesNotUTF8, [[1], nil, Array("latin-1".utf8)]).map { name, value in
                       name.withUnsafeBytes { KafkaHeader(nameBytes: $0, value: value) }
                   },
                   expected: .deadLetter(code: "invalid_json")),
            // The producer's own `request-id` header stays, before the bridge's.
            Record(value: Array("not json, its own request-id".utf8),
                   headers: [header("request-id", Array("producer-7".utf8)), header("x-trace", [1])],
                   expected: .deadLetter(code: "invalid_json")),
            // A null header value stays null in the dead letter, apart from an empty one.
            Record(value: Array("not json either".utf8), headers: [header("x-null", nil), header("x-empty", []), header("x-null", nil)],
                   expected: .deadLetter(code: "invalid_json")),
            // A tombstone.
            Record(key: Array("gone".utf8), value: nil, expected: .deadLetter(code: "invalid_request")),
            // Pathological JSON: deep nesting, huge numbers, invalid UTF-8, 200 KB of control characters.
            Record(value: Array(String(repeating: "[", count: 100_000).utf8), expected: .deadLetter(code: "invalid_json")),
            Record(value: request(9, extra: #","expiration":1e400"#), expected: .deadLetter(code: "invalid_request")),
            Record(value: request(10, extra: #","priority":100000000000000000000000000000"#), expected: .deadLetter(code: "invalid_request")),
            Record(value: request(11, extra: #","expiration":-1"#), expected: .deadLetter(code: "invalid_request")),
            // The largest expiration the contract allows: a valid request, whatever deadline math follows.
            Record(value: request(12, extra: #","expiration":9223372036854775807"#), expected: .results(count: 1, latencyIsNull: false)),
            Record(value: [0x7B, 0xFF, 0xFE, 0x22, 0x7D], expected: .deadLetter(code: "invalid_json")),
            Record(value: Array(#"{"x":""#.utf8) + [UInt8](repeating: 0x01, count: 200_000) + Array(#""}"#.utf8),
                   expected: .deadLetter(code: "invalid_json", truncated: true)),
            // 700 KB: too many tokens, and a dead letter larger than the producer's limit.
            Record(value: Array(#"{"tokens":[\#(tooManyTokens)],"payload":{"aps":{}}}"#.utf8),
                   expected: .deadLetter(code: "too_many_tokens", truncated: true)),
            Record(value: Array(#"{"id":"\#(String(repeating: "i", count: 300))","token":"\#(token(15))","payload":{}}"#.utf8),
                   expected: .deadLetter(code: "invalid_request")),
            // A 300 KB token string: an `invalid` result, with the string cut (echoed whole, its
            // invalid-token record, key and value, would pass the producer's limit).
            Record(value: Array(#"{"id":"long-token","token":"\#(String(repeating: "x", count: 300_000))","payload":{}}"#.utf8),
                   expected: .results(count: 1, latencyIsNull: false)),
            // Key and headers of 599,900 bytes: with them, no dead letter would fit the producer's
            // 600,000 bytes (Kafka would refuse it and stop the bridge). Headers alone (dropped,
            // the key kept); a key alone (dropped); 300,000 bytes of each (dropping the headers
            // is enough: the key stays).
            Record(key: Array("big-headers".utf8), value: Array("not json".utf8),
                   headers: (0..<4).map { header("x-big-\($0)", [UInt8](repeating: 0x61, count: 149_975)) },
                   expected: .deadLetter(code: "invalid_json", dropped: .headers)),
            Record(key: [UInt8](repeating: 0x6B, count: 599_900), value: Array("not json".utf8), headers: [header("x-small", [1])],
                   expected: .deadLetter(code: "invalid_json", dropped: .headersAndKey)),
            Record(key: [UInt8](repeating: 0x6B, count: 300_000), value: Array("not json".utf8),
                   headers: [header("x-big", [UInt8](repeating: 0x61, count: 299_900))],
                   expected: .deadLetter(code: "invalid_json", dropped: .headers)),
            // Headers of 592,000 bytes leave the value less than its 8 KiB, but a short dead
            // letter still fits whole: nothing is dropped. A 20 KB one does not: the headers go
            // and the value stays whole.
            Record(key: Array("near-limit".utf8), value: Array("not json, near the limit".utf8),
                   headers: (0..<4).map { header("x-near-\($0)", [UInt8](repeating: 0x62, count: 148_000)) },
                   expected: .deadLetter(code: "invalid_json")),
            Record(key: Array("near-limit-long".utf8), value: [UInt8](repeating: 0x7A, count: 20_000),
                   headers: (0..<4).map { header("x-near-\($0)", [UInt8](repeating: 0x62, count: 148_000)) },
                   expected: .deadLetter(code: "invalid_json", dropped: .headers)),
        ]
        // Ordinary requests after them: all delivered.
        for index in 100..<120 {
            records.append(Record(value: request(index), expected: .results(count: 1, latencyIsNull: false)))
        }
        return records
    }

    /// Each record of `records` yields its one dead letter (cut to the producer's limit, its key
    /// and headers dropped where they would leave the value no room) or its results; the process
    /// keeps running and commits every offset.
    @Test func everyPoisonRecordYieldsOneOutputAndTheBridgeKeepsGoing() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let records = Self.records
        let producer = try KafkaProducer(
            bootstrapServers: environment.kafka.bootstrapServers, properties: ["linger.ms": "5"],
            logger: Logger(label: "test.producer"), deliveryHandler: { _, error in #expect(error == nil) })
        for (index, record) in records.enumerated() {
            try producer.produce(
                topic: environment.requestTopic, key: record.key, value: record.value, headers: record.headers,
                tag: UInt64(index), partition: 0, timestampMilliseconds: record.timestamp)
        }
        #expect(producer.flush(timeoutMilliseconds: 30_000))
        producer.close()

        // A producer limit below the largest dead letters: they must be cut to fit, not refused.
        // Written in octal: librdkafka reads integers with strtol, so "02223700" is 600,000 bytes
        // to it (2,223,700 read as decimal would let a 700 KB dead letter through and stop the
        // bridge on a refused record, on every restart).
        let yaml = environment.configurationYAML(groupID: "e2e-poison", producer: ["message.max.bytes": "02223700"])
        let configFile = try TemporaryFile(contents: yaml)
        let log = try ScratchDirectory()
        defer { log.remove() }
        let process = try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("bridge.log"))
        defer { BridgeBinary.stop(process) }

        let expectedResults = records.reduce(0) { sum, record in
            if case .results(let count, _) = record.expected { return sum + count }
            return sum
        }
        let expectedDeadLetters = records.count { if case .deadLetter = $0.expected { true } else { false } }
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: expectedResults, timeoutMilliseconds: 60_000, settleMilliseconds: 1_000)
        let deadLetters = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.deadLetterTopic,
            expectedCount: expectedDeadLetters, timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        #expect(results.count == expectedResults)
        #expect(deadLetters.count == expectedDeadLetters)
        #expect(process.isRunning)

        let resultsByOffset = Dictionary(grouping: results.map(Self.parsed), by: Self.sourceOffset)
        let deadLettersByOffset = Dictionary(grouping: deadLetters, by: { Self.sourceOffset(Self.parsed($0)) })
        for (offset, record) in records.enumerated() {
            let produced = resultsByOffset[offset] ?? []
            let letters = deadLettersByOffset[offset] ?? []
            switch record.expected {
            case .results(let count, let latencyIsNull):
                #expect(produced.count == count, "record \(offset)")
                #expect(letters.isEmpty, "record \(offset)")
                for result in produced {
                    #expect((result["latency_ms"] is NSNull) == latencyIsNull, "record \(offset): \(result)")
                }
            case .deadLetter(let code, let truncated, let dropped):
                #expect(produced.isEmpty, "record \(offset)")
                #expect(letters.count == 1, "record \(offset)")
                guard let letter = letters.first else { continue }
                let object = try Self.object(letter)
                #expect(object["error"] as? String == code, "record \(offset): \(object["error"] ?? "")")
                #expect((object["original_truncated"] as? Bool ?? false) == truncated, "record \(offset)")
                if truncated {
                    #expect(object["original_size"] as? Int == record.value?.count)
                }
                #expect(letter.key == (dropped == .headersAndKey ? nil : record.key), "record \(offset)")
                // The request's id when it had a valid one, else the record's position.
                let requestID = Self.validID(in: record.value) ?? "apns.requests/0/\(offset)"
                // The bridge's `request-id` is the last header.
                #expect(letter.headers.last?.name == "request-id", "record \(offset)")
                #expect(letter.headers.last?.value == Array(requestID.utf8), "record \(offset)")
                if dropped == .nothing {
                    // Before it, every original header (a `request-id` too), in order, its
                    // name's bytes and its value (null or not) as they were.
                    let carried = Array(letter.headers.dropLast())
                    let original = record.headers
                    #expect(carried.map(Self.nameBytes) == original.map(Self.nameBytes), "record \(offset)")
                    #expect(carried.map(\.value) == original.map(\.value), "record \(offset)")
                    if record.value == Self.namesNotUTF8Value {  // the bytes the test wrote, not as KafkaHeader read them
                        #expect(carried.map(Self.nameBytes) == Self.namesNotUTF8)
                    }
                } else {
                    #expect(letter.headers.map(\.name) == ["request-id"], "record \(offset)")
                }
            }
        }
        let longToken = try #require(results.first { $0.header("request-id") == Array("long-token".utf8) })
        let longTokenResult = Self.parsed(longToken)
        #expect(longTokenResult["outcome"] as? String == "invalid")
        let echoedToken = String(repeating: "x", count: InvalidTokenEcho.maximumBytes) + "…"
        let echoedInResult = longTokenResult["token"] as? String
        #expect(echoedInResult == echoedToken, "the result echoes \(echoedInResult?.utf8.count ?? 0) bytes")
        let invalidTokens = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.invalidTokensTopic,
            expectedCount: 1, timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        #expect(invalidTokens.map(\.key) == [Array(echoedToken.utf8)], "\(invalidTokens.map { $0.key?.count ?? 0 }) bytes")
        // The request-id header is the bridge's, whatever the input carried.
        let binary = try #require(results.first { $0.header("request-id") == Array("req-5".utf8) })
        #expect(binary.key == Array("req-5".utf8))

        #expect(waitFor(timeout: .seconds(20)) {
            (try? environment.committedRequestCount(groupID: "e2e-poison")) == Int64(records.count)
        })
        #expect(process.isRunning)
        kill(process.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(process, seconds: 30) == 0, "\(BridgeBinary.tail(of: log.file("bridge.log")))")
    }

    static func object(_ message: KafkaMessage) throws -> [String: Any] {
        let parsed = try JSONSerialization.jsonObject(with: Data(message.value ?? []))
        return try #require(parsed as? [String: Any])
    }

    /// The JSON object of an output record; empty when it is not one (then no offset matches).
    static func parsed(_ message: KafkaMessage) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(message.value ?? []))) as? [String: Any] ?? [:]
    }

    static func sourceOffset(_ object: [String: Any]) -> Int {
        ((object["source"] as? [String: Any])?["offset"] as? Int) ?? -1
    }
}
