import APNs

/// Answers no well-behaved APNs sends, for proving a client survives a hostile or broken peer.
/// Set with ``APNsSimulatorFaults/hostileAnswer``: it replaces the answer of every stream that
/// the rules would answer 200 (requests the rules reject keep Apple's answer).
public enum APNsSimulatorHostileAnswer: Sendable, Equatable {
    /// 400 with a reason Apple does not send (`{"reason":"NotAnAPNsReason"}`).
    case unknownReason
    /// 500 with an HTML body instead of JSON.
    case nonJSONErrorBody
    /// 400 whose JSON error body is `bytes` long (a valid reason, then padding).
    case hugeErrorBody(bytes: Int)
    /// 200 with a JSON body (APNs sends none).
    case bodyOnSuccess
    /// 200 with one extra header whose value is `bytes` long (at most ``maximumHeaderBytes``).
    case oversizedHeader(bytes: Int)
    /// `count` PING frames on the connection before each answer.
    case pingFlood(count: Int)
    /// `count` SETTINGS frames on the connection before each answer.
    case settingsFlood(count: Int)

    /// The reason sent by `unknownReason`.
    public static let unknownReasonText = "NotAnAPNsReason"

    /// The longest value `oversizedHeader` takes: nghttp2 sends no header block above 64 KiB
    /// (its default limit), so a longer one would never leave the server while counted as sent.
    public static let maximumHeaderBytes = 60 << 10
    /// The most SETTINGS frames one answer floods with: nghttp2 walks its list of unacknowledged
    /// SETTINGS on every submission, so the cost grows with the square of the count (100,000
    /// held the simulator's loop for 20 s per answer; 10,000 takes a few milliseconds).
    public static let maximumSettingsFrames = 10_000

    /// What is wrong with this mode (nil when usable): sizes and counts must be positive and
    /// bounded (bodies at most 64 MiB, headers at most ``maximumHeaderBytes``, 100,000 PINGs,
    /// ``maximumSettingsFrames`` SETTINGS).
    var problem: String? {
        switch self {
        case .hugeErrorBody(let bytes):
            return (1...(64 << 20)).contains(bytes) ? nil : "hostile answer size \(bytes) is not between 1 and 64 MiB"
        case .oversizedHeader(let bytes):
            return (1...Self.maximumHeaderBytes).contains(bytes)
                ? nil : "hostile header size \(bytes) is not between 1 and \(Self.maximumHeaderBytes) (60 KiB)"
        case .pingFlood(let count):
            return (1...100_000).contains(count) ? nil : "hostile frame count \(count) is not between 1 and 100000"
        case .settingsFlood(let count):
            return (1...Self.maximumSettingsFrames).contains(count)
                ? nil : "hostile SETTINGS count \(count) is not between 1 and \(Self.maximumSettingsFrames)"
        case .unknownReason, .nonJSONErrorBody, .bodyOnSuccess:
            return nil
        }
    }

    /// The answer to send instead of a 200 carrying `headers` (the `apns-id`).
    func answer(replacing headers: [(name: String, value: String)]) -> APNsSimulatorAnswer {
        switch self {
        case .unknownReason:
            return APNsSimulatorAnswer(status: 400, headers: headers,
                                       body: Array(#"{"reason":"\#(Self.unknownReasonText)"}"#.utf8),
                                       reason: .unknown(Self.unknownReasonText))
        case .nonJSONErrorBody:
            return APNsSimulatorAnswer(status: 500, headers: headers + [(name: "content-type", value: "text/html")],
                                       body: Array("<html><body>Internal Server Error</body></html>".utf8), reason: nil)
        case .hugeErrorBody(let bytes):
            var body = Array(#"{"reason":"BadDeviceToken","padding":""#.utf8)
            let closing = Array(#""}"#.utf8)
            body.append(contentsOf: repeatElement(UInt8(ascii: "x"), count: max(0, bytes - body.count - closing.count)))
            body.append(contentsOf: closing)
            return APNsSimulatorAnswer(status: 400, headers: headers, body: body, reason: .badDeviceToken)
        case .bodyOnSuccess:
            return APNsSimulatorAnswer(status: 200, headers: headers, body: Array(#"{"unexpected":true}"#.utf8), reason: nil)
        case .oversizedHeader(let bytes):
            return APNsSimulatorAnswer(status: 200, headers: headers + [(name: "x-oversized", value: String(repeating: "x", count: bytes))],
                                       body: [], reason: nil)
        case .pingFlood, .settingsFlood:
            return APNsSimulatorAnswer(status: 200, headers: headers, body: [], reason: nil)
        }
    }
}

extension APNsSimulatorHostileAnswer {
    /// The command-line spellings: `unknown-reason`, `non-json`, `huge-body:BYTES`,
    /// `body-on-200`, `oversized-header:BYTES`, `ping-flood:N`, `settings-flood:N`.
    public static let argumentSyntax =
        "unknown-reason | non-json | huge-body:BYTES | body-on-200 | oversized-header:BYTES | ping-flood:N | settings-flood:N"

    /// Parses one of the ``argumentSyntax`` spellings; nil when it is none of them.
    public init?(argument: String) {
        let parts = argument.split(separator: ":", maxSplits: 1).map(String.init)
        let number = parts.count == 2 ? Int(parts[1]) : nil
        switch (parts.first ?? "", number) {
        case ("unknown-reason", nil) where parts.count == 1: self = .unknownReason
        case ("non-json", nil) where parts.count == 1: self = .nonJSONErrorBody
        case ("body-on-200", nil) where parts.count == 1: self = .bodyOnSuccess
        case ("huge-body", let bytes?): self = .hugeErrorBody(bytes: bytes)
        case ("oversized-header", let bytes?): self = .oversizedHeader(bytes: bytes)
        case ("ping-flood", let count?): self = .pingFlood(count: count)
        case ("settings-flood", let count?): self = .settingsFlood(count: count)
        default: return nil
        }
    }
}
