import Bridge
/// The benchmark's requests: every token valid and distinct, every notification deliverable, so
/// the run measures the happy path (one HTTP/2 stream and one result per token).
public struct BenchmarkWorkload: Sendable {
    /// The app every request names (the one app of `LocalEnvironment.configurationYAML`).
    public static let app = "demo"
    /// The APNs topic of that app.
    public static let apnsTopic = "com.example.demo"
    /// The payload of every notification (also what the h2load reference sends).
    public static let payload = #"{"aps":{"alert":{"title":"Benchmark","body":"Hello from apns-bridge bench"},"sound":"default"}}"#

    /// The records to produce, in order.
    public let records: [DemoWorkload.Record]
    /// `DemoWorkload.outcomeKey(requestID:token:)` of every result the run must produce.
    public let expectedKeys: Set<String>
    /// Tokens in each request.
    public let tokensPerRequest: Int

    /// Builds `requests` requests of `tokensPerRequest` tokens each, with ids `<idPrefix>-<n>`.
    public init(requests: Int, tokensPerRequest: Int, seed: UInt64 = 7, idPrefix: String = "bench") {
        var generator = SeededGenerator(seed: seed)
        var records: [DemoWorkload.Record] = []
        records.reserveCapacity(requests)
        var keys = Set<String>(minimumCapacity: requests * tokensPerRequest)
        for index in 0..<requests {
            let id = "\(idPrefix)-\(index)"
            var json = "{\"id\":\"\(id)\",\"app\":\"\(Self.app)\",\"tokens\":["
            for tokenIndex in 0..<tokensPerRequest {
                let token = Self.token(number: UInt64(index * tokensPerRequest + tokenIndex), generator: &generator)
                json += (tokenIndex == 0 ? "\"" : ",\"") + token + "\""
                keys.insert(DemoWorkload.outcomeKey(requestID: id, token: token))
            }
            json += "],\"payload\":\(Self.payload)}"
            records.append(DemoWorkload.Record(key: Array(id.utf8), value: Array(json.utf8)))
        }
        self.records = records
        self.expectedKeys = keys
        self.tokensPerRequest = tokensPerRequest
        self.idPrefix = idPrefix
    }

    /// The prefix of every request id (and result key) of this workload.
    public let idPrefix: String

    /// Results the run must produce.
    public var expectedResults: Int { expectedKeys.count }

    /// The largest request record (key + value) in bytes.
    public var largestRequestBytes: Int {
        records.map { $0.key.count + $0.value.count }.max() ?? 0
    }

    /// A generous estimate of one result record's bytes (key, value and `request-id` header):
    /// a result as the bridge writes it, with every field at its widest for this workload.
    public var estimatedResultBytes: Int {
        let id = "\(idPrefix)-\(max(records.count - 1, 0))"
        let result = PushResult(
            requestID: id, app: Self.app, token: String(repeating: "f", count: 64), outcome: .delivered, status: 200,
            apnsID: "00000000-0000-0000-0000-000000000000", attempts: 1, latencyMilliseconds: 999_999.9,
            source: RecordSource(topic: "apns.requests", partition: 9_999, offset: 9_999_999_999),
            completedAtMilliseconds: 1_700_000_000_000
        )
        var value: [UInt8] = []
        ResultRecordEncoder.appendResult(result, to: &value)
        return value.count + id.utf8.count * 2 + "request-id".utf8.count
    }

    /// A device token: 48 pseudo-random hex digits then 16 digits of `number`, so tokens are
    /// distinct by construction and look like real ones.
    static func token(number: UInt64, generator: inout SeededGenerator) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        for _ in 0..<4 {
            var random = generator.next()
            for _ in 0..<12 {
                bytes.append(digits[Int(random & 15)])
                random >>= 4
            }
        }
        for shift in stride(from: 60, through: 0, by: -4) {
            bytes.append(digits[Int((number >> UInt64(shift)) & 15)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A valid 64-digit token for the h2load reference run.
    public static var referenceToken: String {
        var generator = SeededGenerator(seed: 99)
        return token(number: 0, generator: &generator)
    }
}
