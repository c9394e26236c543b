import Bridge
/// A reproducible mix of push requests that exercises every path of the pipeline, with the
/// outcome each token must get: plain sends, fan-out with duplicates, unregistered tokens,
/// malformed tokens, expired requests, background pushes and unusable records.
public struct DemoWorkload: Sendable {
    /// One input record.
    public struct Record: Sendable {
        /// Record key.
        public var key: [UInt8]
        /// Record value (the request JSON, or deliberately broken bytes).
        public var value: [UInt8]

        /// Creates a record.
        public init(key: [UInt8], value: [UInt8]) {
            self.key = key
            self.value = value
        }
    }

    /// The records to produce, in order.
    public private(set) var records: [Record] = []
    /// (request id, token) → the outcome its result must carry.
    public private(set) var expectedOutcomes: [String: PushOutcome] = [:]
    /// Tokens the simulator must answer 410 Unregistered for (token → ms timestamp).
    public private(set) var unregisteredTokens: [String: Int64] = [:]
    /// Records that must go to the dead-letter topic.
    public private(set) var expectedDeadLetters = 0
    /// Tokens that must appear on the invalid-tokens topic.
    public private(set) var expectedInvalidTokens = 0

    /// Results expected in total (one per distinct token of every accepted request).
    public var expectedResults: Int { expectedOutcomes.count }

    /// Key of `expectedOutcomes`.
    public static func outcomeKey(requestID: String, token: String) -> String {
        requestID + "|" + token
    }

    /// Builds `count` requests from a seed (the same seed gives the same workload).
    public init(count: Int, seed: UInt64 = 42) {
        var generator = SeededGenerator(seed: seed)
        for index in 0..<count {
            let id = "demo-\(index)"
            let payload = #"{"aps":{"alert":{"title":"Hello","body":"Message \#(index)"},"sound":"default"}}"#
            switch index % 10 {
            case 0 where index % 20 == 0:
                // Unusable input: broken JSON.
                records.append(Record(key: Array(id.utf8), value: Array(#"{"id":"\#(id)","tokens":["#.utf8)))
                expectedDeadLetters += 1
            case 1:
                // Fan-out with a duplicate: three distinct tokens, each sent once.
                let tokens = (0..<3).map { _ in Self.token(&generator) }
                add(id: id, tokens: tokens + [tokens[0]], payload: payload, outcome: .delivered)
            case 2:
                let token = Self.token(&generator)
                unregisteredTokens[token] = 1_700_000_000_000 + Int64(index)
                add(id: id, tokens: [token], payload: payload, outcome: .rejected)
                expectedInvalidTokens += 1
            case 3:
                // One good token and one that is not a device token.
                let good = Self.token(&generator)
                let bad = "not-a-token-\(index)"
                appendRecord(id: id, tokensJSON: "[\"\(good)\",\"\(bad)\"]", payload: payload)
                expectedOutcomes[Self.outcomeKey(requestID: id, token: good)] = .delivered
                expectedOutcomes[Self.outcomeKey(requestID: id, token: bad)] = .invalid
                expectedInvalidTokens += 1
            case 4:
                let token = Self.token(&generator)
                appendRecord(id: id, tokensJSON: "[\"\(token)\"]", payload: payload, extra: #","expiration":1000000000"#)
                expectedOutcomes[Self.outcomeKey(requestID: id, token: token)] = .expired
            case 5:
                let token = Self.token(&generator)
                appendRecord(id: id, tokensJSON: nil, singleToken: token, payload: #"{"aps":{"content-available":1}}"#,
                             extra: #","push_type":"background""#)
                expectedOutcomes[Self.outcomeKey(requestID: id, token: token)] = .delivered
            default:
                add(id: id, tokens: [Self.token(&generator)], payload: payload, outcome: .delivered)
            }
        }
    }

    private mutating func add(id: String, tokens: [String], payload: String, outcome: PushOutcome) {
        let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
        appendRecord(id: id, tokensJSON: "[\(list)]", payload: payload)
        for token in tokens {
            expectedOutcomes[Self.outcomeKey(requestID: id, token: token)] = outcome
        }
    }

    private mutating func appendRecord(id: String, tokensJSON: String?, singleToken: String? = nil, payload: String,
                                       extra: String = "") {
        var json = "{\"id\":\"\(id)\",\"app\":\"demo\""
        if let tokensJSON { json += ",\"tokens\":\(tokensJSON)" }
        if let singleToken { json += ",\"token\":\"\(singleToken)\"" }
        json += ",\"payload\":\(payload)\(extra)}"
        records.append(Record(key: Array(id.utf8), value: Array(json.utf8)))
    }

    private static func token(_ generator: inout SeededGenerator) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        for _ in 0..<64 {
            bytes.append(digits[Int(generator.next() & 15)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A small deterministic random number generator (SplitMix64) for reproducible workloads.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Starts the sequence at `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
