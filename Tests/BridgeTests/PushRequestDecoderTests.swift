@testable import Bridge
import APNs
import Testing

@Suite struct PushRequestDecoderTests {
    static let chat = RegisteredApp(name: "chat", bundleID: "com.example.chat", environment: .production)
    static let legacy = RegisteredApp(name: "legacy", bundleID: "com.example.legacy", environment: .sandbox)
    static let source = RecordSource(topic: "apns.requests", partition: 3, offset: 1234)
    static let tokenA = String(repeating: "a1", count: 32)
    static let tokenB = String(repeating: "b2", count: 32)

    let single = PushRequestDecoder(apps: [chat], maxTokensPerRequest: 5)
    let multi = PushRequestDecoder(apps: [chat, legacy], maxTokensPerRequest: 5)

    func request(_ text: String, decoder: PushRequestDecoder? = nil) throws -> PushRequest {
        switch (decoder ?? single).decode(value: Array(text.utf8), source: Self.source) {
        case .request(let request): return request
        case .deadLetter(let deadLetter):
            Issue.record("unexpected dead letter \(deadLetter)")
            throw deadLetter
        }
    }

    func deadLetter(_ text: String, decoder: PushRequestDecoder? = nil) -> DeadLetter? {
        deadLetter(bytes: Array(text.utf8), decoder: decoder)
    }

    func deadLetter(bytes: [UInt8]?, decoder: PushRequestDecoder? = nil) -> DeadLetter? {
        if case .deadLetter(let deadLetter) = (decoder ?? single).decode(value: bytes, source: Self.source) {
            return deadLetter
        }
        return nil
    }

    @Test func minimalRequestGetsEveryDefault() throws {
        let decoded = try request("{\"token\": \"\(Self.tokenA)\", \"payload\": {\"aps\":{\"alert\":\"hi\"}}}")
        #expect(decoded.id == "apns.requests/3/1234")
        #expect(decoded.app == "chat")
        #expect(decoded.validTokens == [Self.tokenA])
        #expect(decoded.invalidTokens.isEmpty)
        #expect(decoded.payload == Array("{\"aps\":{\"alert\":\"hi\"}}".utf8))
        #expect(decoded.pushType == .alert)
        #expect(decoded.priority == 10)
        #expect(decoded.expiration == nil)
        #expect(decoded.collapseID == nil)
        #expect(decoded.topic == "com.example.chat")
        #expect(decoded.environment == .production)
        #expect(decoded.apnsID == nil)
        #expect(decoded.source == Self.source)
    }

    @Test func everyFieldIsRead() throws {
        let text = """
        {"id": "chat-7781", "app": "legacy", "token": "\(Self.tokenA.uppercased())", "push_type": "voip",
         "priority": 5, "expiration": 1700000000, "collapse_id": "c1", "environment": "production",
         "apns_id": "0E9C3B44-1B8A-4E5B-9C0D-7A1B2C3D4E5F", "unknown": {"ignored": true},
         "payload" :  { "aps" : { "content-available" : 1 } , "x": "\\u00e9" }  }
        """
        let decoded = try request(text, decoder: multi)
        #expect(decoded.id == "chat-7781")
        #expect(decoded.app == "legacy")
        #expect(decoded.validTokens == [Self.tokenA])  // lower-cased
        #expect(decoded.pushType == .voip)
        #expect(decoded.priority == 5)
        #expect(decoded.expiration == 1_700_000_000)
        #expect(decoded.collapseID == "c1")
        #expect(decoded.topic == "com.example.legacy.voip")
        #expect(decoded.environment == .production)  // overrides the app's sandbox
        #expect(decoded.apnsID == "0e9c3b44-1b8a-4e5b-9c0d-7a1b2c3d4e5f")
        #expect(decoded.payload == Array("{ \"aps\" : { \"content-available\" : 1 } , \"x\": \"\\u00e9\" }".utf8))
        let sandbox = try request("{\"app\":\"legacy\",\"token\":\"\(Self.tokenA)\",\"payload\":{},\"topic\":\"com.other\"}", decoder: multi)
        #expect(sandbox.environment == .sandbox)
        #expect(sandbox.topic == "com.other")
    }

    @Test func pushTypesSelectTopicSuffixAndDefaultPriority() throws {
        let expected: [PushType: String] = [
            .alert: "", .background: "", .mdm: "", .voip: ".voip", .complication: ".complication",
            .fileprovider: ".pushkit.fileprovider", .liveactivity: ".push-type.liveactivity", .location: ".location-query",
            .pushtotalk: ".voip-ptt", .widgets: ".push-type.widgets", .controls: ".push-type.controls",
        ]
        #expect(PushType.allCases.count == 11)
        for type in PushType.allCases {
            let decoded = try request("{\"token\":\"\(Self.tokenA)\",\"payload\":{},\"push_type\":\"\(type.rawValue)\"}")
            #expect(decoded.topic == "com.example.chat" + (expected[type] ?? "?"))
            #expect(decoded.priority == (type == .background ? 5 : 10))
        }
        let explicit = try request("{\"token\":\"\(Self.tokenA)\",\"payload\":{},\"push_type\":\"background\",\"priority\":1}")
        #expect(explicit.priority == 1)
    }

    @Test func tokensAreDeduplicatedAndMalformedOnesSetAside() throws {
        let tokens = [
            Self.tokenA, Self.tokenB.uppercased(), Self.tokenA.uppercased(), "xyz", "xyz", Self.tokenB,
        ]
        let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
        let roomy = PushRequestDecoder(apps: [Self.chat], maxTokensPerRequest: 100)
        let decoded = try request("{\"tokens\":[\(list)],\"payload\":{}}", decoder: roomy)
        #expect(decoded.validTokens == [Self.tokenA, Self.tokenB])
        #expect(decoded.invalidTokens == ["xyz"])
        // Past the short-list limit the duplicates are found by hashing, with the same result.
        let longList = (tokens + tokens).map { "\"\($0)\"" }.joined(separator: ",")
        #expect(tokens.count * 2 > PushRequestDecoder.linearDuplicateCheckLimit)
        let long = try request("{\"tokens\":[\(longList)],\"payload\":{}}", decoder: roomy)
        #expect(long.validTokens == [Self.tokenA, Self.tokenB])
        #expect(long.invalidTokens == ["xyz"])

        let odd = String(repeating: "a", count: 65)
        let short = String(repeating: "a", count: 62)
        let tooLong = String(repeating: "a", count: 202)
        let longest = String(repeating: "a", count: 200)
        let nonHex = String(repeating: "g", count: 64)
        let mixed = try request("{\"tokens\":[\"\(odd)\",\"\(short)\",\"\(tooLong)\",\"\(longest)\",\"\(nonHex)\"],\"payload\":{}}")
        #expect(mixed.validTokens == [longest])
        #expect(mixed.invalidTokens == [odd, short, tooLong, nonHex])

        let onlyInvalid = try request("{\"token\":\"not-a-token\",\"payload\":{}}")
        #expect(onlyInvalid.validTokens.isEmpty)
        #expect(onlyInvalid.invalidTokens == ["not-a-token"])

        // An escaped token decodes before it is checked.
        let escaped = try request("{\"token\":\"\\u0061\(Self.tokenA.dropFirst())\",\"payload\":{}}")
        #expect(escaped.validTokens == [Self.tokenA])
    }

    @Test func keysAreMatchedAfterTheirEscapesAreDecoded() throws {
        // "\u0074oken" is "token" and "p\u0061yload" is "payload": the same fields as written plainly.
        let escapedKeys = try request("{\"\\u0074oken\":\"\(Self.tokenA)\",\"p\\u0061yload\":{},\"priorit\\u0079\":5}")
        #expect(escapedKeys.validTokens == [Self.tokenA])
        #expect(escapedKeys.priority == 5)
        // Written once plainly and once escaped, a field appears twice.
        let twice = deadLetter("{\"token\":\"\(Self.tokenA)\",\"payload\":{},\"priority\":5,\"priorit\\u0079\":10}")
        #expect(twice?.detail == "field \"priority\": appears more than once")
        // Near misses and prefixes of known names are unknown fields, ignored.
        let unknown = try request("{\"token\":\"\(Self.tokenA)\",\"payload\":{},\"priorit\":1,\"prioritys\":1,\"\":1,\"Priority\":1}")
        #expect(unknown.priority == 10)
    }

    /// Every known name finds its own field (and no other): given twice, each is named back as
    /// the field that appears more than once; one byte changed at either end, it is unknown.
    @Test(arguments: ["id", "app", "tokens", "token", "payload", "topic", "environment", "push_type", "priority",
                      "expiration", "collapse_id", "apns_id"])
    func eachFieldNameFindsItsField(name: String) throws {
        let twice = deadLetter("{\"\(name)\":null,\"\(name)\":null}")
        #expect(twice?.detail == "field \"\(name)\": appears more than once")
        let first = "X" + name.dropFirst(), last = name.dropLast() + "X"
        let nearMisses = try request("{\"token\":\"\(Self.tokenA)\",\"payload\":{},\"\(first)\":1,\"\(first)\":1,\"\(last)\":1,\"\(last)\":1}")
        #expect(nearMisses.validTokens == [Self.tokenA])
    }

    @Test func tokenRules() {
        func detail(_ text: String) -> String? { deadLetter(text)?.detail }
        #expect(deadLetter("{\"payload\":{}}")?.code == .invalidRequest)
        #expect(detail("{\"payload\":{}}")?.contains("\"tokens\"") == true)
        #expect(detail("{\"token\":\"\(Self.tokenA)\",\"tokens\":[\"\(Self.tokenA)\"],\"payload\":{}}")?.contains("not both") == true)
        #expect(detail("{\"tokens\":[],\"payload\":{}}") == "field \"tokens\": must not be empty")
        #expect(detail("{\"tokens\":\"\(Self.tokenA)\",\"payload\":{}}") == "field \"tokens\": must be an array of strings")
        #expect(detail("{\"tokens\":[\"\(Self.tokenA)\", 7],\"payload\":{}}") == "field \"tokens[1]\": must be a string")
        #expect(detail("{\"token\":7,\"payload\":{}}") == "field \"token\": must be a string")
        let six = Array(repeating: "\"\(Self.tokenA)\"", count: 6).joined(separator: ",")
        let tooMany = deadLetter("{\"tokens\":[\(six)],\"payload\":{}}")
        #expect(tooMany?.code == .tooManyTokens)
        #expect(tooMany?.detail.contains("\"tokens\"") == true)
        let five = Array(repeating: "\"\(Self.tokenA)\"", count: 5).joined(separator: ",")
        #expect(deadLetter("{\"tokens\":[\(five)],\"payload\":{}}") == nil)
    }

    @Test func fieldRulesNameTheField() {
        let token = "\"token\":\"\(Self.tokenA)\""
        let cases: [(String, String)] = [
            ("{\(token),\"payload\":{},\"priority\":7}", "field \"priority\": must be 10, 5 or 1"),
            ("{\(token),\"payload\":{},\"priority\":\"10\"}", "field \"priority\": must be 10, 5 or 1"),
            ("{\(token),\"payload\":{},\"priority\":10.5}", "field \"priority\": must be 10, 5 or 1"),
            ("{\(token),\"payload\":{},\"priority\":7.0}", "field \"priority\": must be 10, 5 or 1"),
            ("{\(token),\"payload\":{},\"expiration\":17e-1}", "field \"expiration\""),
            ("{\(token),\"payload\":{},\"expiration\":1e19}", "field \"expiration\""),
            ("{\(token),\"payload\":{},\"expiration\":-1.0e3}", "field \"expiration\""),
            ("{\(token),\"payload\":{},\"expiration\":-1}", "field \"expiration\""),
            ("{\(token),\"payload\":{},\"expiration\":1.5}", "field \"expiration\""),
            ("{\(token),\"payload\":{},\"push_type\":\"email\"}", "field \"push_type\": unknown push type \"email\""),
            ("{\(token),\"payload\":{},\"push_type\":1}", "field \"push_type\""),
            ("{\(token),\"payload\":{},\"collapse_id\":\"\(String(repeating: "c", count: 65))\"}", "field \"collapse_id\""),
            ("{\(token),\"payload\":{},\"collapse_id\":\"a\\nb\"}", "field \"collapse_id\""),
            ("{\(token),\"payload\":{},\"topic\":\"\"}", "field \"topic\""),
            // A value starting or ending with a space is a malformed HTTP/2 header value (RFC 9113).
            ("{\(token),\"payload\":{},\"collapse_id\":\" thread-42\"}", "field \"collapse_id\""),
            ("{\(token),\"payload\":{},\"topic\":\"com.example.chat \"}", "field \"topic\": must be a string of 1 to 255 bytes without control characters or surrounding spaces"),
            ("{\(token),\"payload\":{},\"environment\":\"staging\"}", "field \"environment\""),
            ("{\(token),\"payload\":{},\"apns_id\":\"not-a-uuid\"}", "field \"apns_id\""),
            ("{\(token),\"payload\":{},\"apns_id\":\"0E9C3B44-1B8A-4E5B-9C0D-7A1B2C3D4E5\"}", "field \"apns_id\""),
            ("{\"tokens\":[\"\(Self.tokenA)\",\"\(Self.tokenB)\"],\"payload\":{},\"apns_id\":\"0e9c3b44-1b8a-4e5b-9c0d-7a1b2c3d4e5f\"}",
             "field \"apns_id\": only allowed with exactly one token"),
            ("{\(token)}", "field \"payload\": required"),
            ("{\(token),\"payload\":[1]}", "field \"payload\": must be a JSON object"),
            ("{\(token),\"payload\":\"{}\"}", "field \"payload\": must be a JSON object"),
            ("{\(token),\"payload\":{},\"id\":\"\"}", "field \"id\": must be a string of 1 to 256 characters"),
            ("{\(token),\"payload\":{},\"id\":\"\(String(repeating: "é", count: 257))\"}", "field \"id\""),
            ("{\(token),\"payload\":{},\"id\":5}", "field \"id\""),
            ("{\(token),\"payload\":{},\"app\":5}", "field \"app\": must be a string"),
            ("{\(token),\"payload\":{},\"priority\":10,\"priority\":5}", "field \"priority\": appears more than once"),
            ("{\(token),\"payload\":{},\"priority\":null,\"priority\":5}", "field \"priority\": appears more than once"),
            ("{\(token),\"payload\":{},\"priority\":5,\"priority\":null}", "field \"priority\": appears more than once"),
            ("{\(token),\"payload\":{},\"apns_id\":null,\"apns_id\":null}", "field \"apns_id\": appears more than once"),
            ("[1]", "the request must be a JSON object"),
        ]
        for (text, expected) in cases {
            let found = deadLetter(text)
            #expect(found?.code == .invalidRequest, "\(text)")
            #expect(found?.detail.hasPrefix(expected) == true, "\(text) → \(String(describing: found))")
        }
        // Limits that are allowed.
        let id256 = String(repeating: "é", count: 256)
        #expect(deadLetter("{\(token),\"payload\":{},\"id\":\"\(id256)\",\"collapse_id\":\"\(String(repeating: "c", count: 64))\"}") == nil)
        // Null counts as absent; unknown fields are ignored.
        #expect(deadLetter("{\(token),\"payload\":{},\"priority\":null,\"tokens\":null,\"whatever\":[1,{}]}") == nil)
    }

    /// JSON has one number type: a whole number written with a fraction or an exponent (as
    /// producers whose numbers are floating point write them) is the same number.
    @Test func wholeNumbersWithAFractionOrAnExponentAreAccepted() throws {
        let token = "\"token\":\"\(Self.tokenA)\",\"payload\":{}"
        let cases: [(String, priority: Int, expiration: Int64)] = [
            ("\"priority\":10.0,\"expiration\":1700000000.0", 10, 1_700_000_000),
            ("\"priority\":5e0,\"expiration\":1.7e9", 5, 1_700_000_000),
            ("\"priority\":1.00,\"expiration\":17E+8", 1, 1_700_000_000),
            ("\"priority\":50e-1,\"expiration\":0.0", 5, 0),
            ("\"priority\":100.0e-1,\"expiration\":-0", 10, 0),
        ]
        for (fields, priority, expiration) in cases {
            let decoded = try request("{\(token),\(fields)}")
            #expect(decoded.priority == priority, "\(fields)")
            #expect(decoded.expiration == expiration, "\(fields)")
        }
    }

    @Test func appSelection() {
        let token = "\"token\":\"\(Self.tokenA)\",\"payload\":{}"
        #expect(deadLetter("{\(token)}", decoder: multi)?.detail == "field \"app\": required when more than one app is configured")
        let unknown = deadLetter("{\(token),\"app\":\"nope\"}", decoder: multi)
        #expect(unknown?.code == .unknownApp)
        #expect(unknown?.detail == "field \"app\": unknown app \"nope\"")
        #expect(deadLetter("{\(token),\"app\":\"legacy\"}")?.code == .unknownApp)  // the single app must still match
        #expect(deadLetter("{\(token),\"app\":\"chat\"}") == nil)
    }

    /// A record that breaks a rule after a valid `id` is still known by it (its dead letter's
    /// `request-id`); one whose id is missing gets the default; one whose id is itself bad, none.
    @Test func aDeadLetterKeepsTheRequestIDWhenItWasValid() {
        let token = "\"token\":\"\(Self.tokenA)\",\"payload\":{}"
        #expect(deadLetter("{\"id\":\"chat-9\",\(token),\"app\":\"nope\"}", decoder: multi)?.requestID == "chat-9")
        #expect(deadLetter("{\"id\":\"chat-10\",\(token),\"priority\":7}")?.requestID == "chat-10")
        #expect(deadLetter("{\(token),\"priority\":7}")?.requestID == PushRequestDecoder.defaultID(of: Self.source))
        #expect(deadLetter("{\"id\":\"\(String(repeating: "i", count: 300))\",\(token)}")?.requestID == nil)
        #expect(deadLetter("{\"id\":\"chat-11\",")?.requestID == nil)  // not JSON: nothing is known
    }

    @Test func payloadSizeIsMeasuredAsTheRawBytes() {
        func body(size: Int) -> String {
            // {"p":"xxx…"} is 8 bytes of framing around the filler.
            "{\"p\":\"" + String(repeating: "x", count: size - 8) + "\"}"
        }
        let token = "\"token\":\"\(Self.tokenA)\""
        #expect(deadLetter("{\(token),\"payload\":\(body(size: 4096))}") == nil)
        let over = deadLetter("{\(token),\"payload\":\(body(size: 4097))}")
        #expect(over?.code == .payloadTooLarge)
        #expect(over?.detail.contains("4097") == true)
        #expect(deadLetter("{\(token),\"push_type\":\"voip\",\"payload\":\(body(size: 5120))}") == nil)
        #expect(deadLetter("{\(token),\"push_type\":\"voip\",\"payload\":\(body(size: 5121))}")?.code == .payloadTooLarge)
        // Whitespace inside the payload counts: it is sent as is.
        let spaced = "{ " + String(repeating: " ", count: 4094) + "}"  // 4097 bytes in all
        #expect(deadLetter("{\(token),\"payload\":\(spaced)}")?.code == .payloadTooLarge)
    }

    @Test func invalidJSONAndNullValues() {
        let broken = deadLetter("{\"token\": oops}")
        #expect(broken?.code == .invalidJSON)
        #expect(broken?.detail.hasPrefix("line 1, column 11: ") == true)
        let badUTF8 = deadLetter(bytes: Array("{\"token\":\"".utf8) + [0xC3, 0x28] + Array("\",\"payload\":{}}".utf8))
        #expect(badUTF8?.code == .invalidJSON)
        #expect(badUTF8?.detail == "invalid UTF-8 at byte 10")
        let null = deadLetter(bytes: nil)
        #expect(null?.code == .invalidRequest)
        #expect(null?.detail.contains("no value") == true)
        #expect(deadLetter("")?.code == .invalidJSON)
    }

    @Test func decoderFromConfiguration() throws {
        let configuration = BridgeConfiguration(
            kafka: KafkaSettings(brokers: "b"),
            apps: [AppSettings(name: "chat", bundleID: "com.example.chat", environment: .sandbox,
                               auth: .token(keyFile: "k", keyID: "ABC123DEFG", teamID: "TEAM123456"))],
            limits: LimitsSettings(maxInFlight: 10, maxTokensPerRequest: 1))
        let decoder = PushRequestDecoder(configuration: configuration)
        let decoded = try request("{\"token\":\"\(Self.tokenA)\",\"payload\":{}}", decoder: decoder)
        #expect(decoded.environment == .sandbox)
        #expect(deadLetter("{\"tokens\":[\"\(Self.tokenA)\",\"\(Self.tokenB)\"],\"payload\":{}}", decoder: decoder)?.code == .tooManyTokens)
    }

    /// Every byte value at the first, a middle and the last position of a 64-digit token: only
    /// hex digits pass, and upper-case ones are lowered.
    @Test func tokenBytesAreClassifiedOneByOne() {
        for byte in 0...255 {
            let scalar = Character(UnicodeScalar(UInt8(byte)))
            for position in [0, 31, 63] {
                var characters = Array(Self.tokenA)
                characters[position] = scalar
                let token = String(characters)
                let isHex = scalar.isHexDigit && scalar.isASCII
                let expected = isHex ? token.lowercased() : nil
                #expect(PushRequestDecoder.normalizedToken(token) == expected, "byte \(byte) at \(position)")
            }
        }
    }
}
