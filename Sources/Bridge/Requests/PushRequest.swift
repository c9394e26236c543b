import APNs
/// Where an input record came from: topic, partition, offset.
public struct RecordSource: Sendable, Hashable {
    /// The Kafka topic.
    public var topic: String
    /// The partition.
    public var partition: Int32
    /// The record's offset.
    public var offset: Int64

    /// Creates a source.
    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}

/// The `push_type` of a request: the APNs module's type, so topic suffixes, default
/// priorities and payload limits are defined once.
public typealias PushType = APNsPushType

/// A validated push request (contract §2), ready to fan out into one notification per token.
///
/// Optional properties that hold references are declared `Optional<…>`, not `…?`: a `var x: T?`
/// starts out as nil, and the compiler then copied and destroyed the whole value at the end of
/// every `init` (docs/BENCHMARKS.md).
public struct PushRequest: Sendable, Equatable {
    /// `id`, or `"<topic>/<partition>/<offset>"` when absent.
    public var id: String
    /// The app's configured name.
    public var app: String
    /// Distinct well-formed tokens, lower-cased, in first-seen order.
    public var validTokens: [String]
    /// Distinct malformed token strings as given (they become `invalid` results), first-seen order.
    public var invalidTokens: [String]
    /// The `payload` object's exact input bytes (never re-encoded).
    public var payload: [UInt8]
    /// `push_type` (default alert).
    public var pushType: PushType
    /// `priority`: 10, 5 or 1.
    public var priority: Int
    /// `expiration` (unix seconds), if given.
    public var expiration: Int64?
    /// `collapse_id` (≤ 64 bytes), if given.
    public var collapseID: Optional<String>
    /// `apns-topic`: the override, or the bundle id plus the push type's suffix.
    public var topic: String
    /// `environment`, or the app's.
    public var environment: PushEnvironment
    /// `apns_id`, lower-cased canonical UUID (only with exactly one token).
    public var apnsID: Optional<String>
    /// The input record.
    public var source: RecordSource

    /// Creates a request (the decoder does this; also useful for one-off sends and tests).
    public init(id: String, app: String, validTokens: [String], invalidTokens: [String] = [], payload: [UInt8],
                pushType: PushType = .alert, priority: Int? = nil, expiration: Int64? = nil, collapseID: String? = nil,
                topic: String, environment: PushEnvironment, apnsID: String? = nil, source: RecordSource) {
        self.id = id
        self.app = app
        self.validTokens = validTokens
        self.invalidTokens = invalidTokens
        self.payload = payload
        self.pushType = pushType
        self.priority = priority ?? pushType.defaultPriority
        self.expiration = expiration
        self.collapseID = collapseID
        self.topic = topic
        self.environment = environment
        self.apnsID = apnsID
        self.source = source
    }
}

/// A stable, machine-readable dead-letter code (contract §5).
public struct DeadLetterCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The code as written in the dead-letter record.
    public var rawValue: String

    /// Creates a code.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The value is not valid UTF-8 JSON.
    public static let invalidJSON = DeadLetterCode(rawValue: "invalid_json")
    /// The JSON breaks a rule of contract §2 (or the record has no value).
    public static let invalidRequest = DeadLetterCode(rawValue: "invalid_request")
    /// `app` names no configured app.
    public static let unknownApp = DeadLetterCode(rawValue: "unknown_app")
    /// The payload is larger than Apple's limit for the push type.
    public static let payloadTooLarge = DeadLetterCode(rawValue: "payload_too_large")
    /// More tokens than `limits.max_tokens_per_request`.
    public static let tooManyTokens = DeadLetterCode(rawValue: "too_many_tokens")

    /// The raw value.
    public var description: String { rawValue }
}

/// Why an input record goes to the dead-letter topic.
public struct DeadLetter: Sendable, Equatable, Error {
    /// The machine-readable code.
    public var code: DeadLetterCode
    /// What is wrong, naming the field (e.g. `field "priority": must be 10, 5 or 1`).
    public var detail: String
    /// The request's id when the record was JSON with a valid `id` (or none: then the default
    /// `<topic>/<partition>/<offset>`) and broke a rule after it; nil when it was not known.
    public var requestID: String?

    /// Creates a dead letter.
    public init(code: DeadLetterCode, detail: String, requestID: String? = nil) {
        self.code = code
        self.detail = detail
        self.requestID = requestID
    }
}

/// The outcome of decoding one input record.
public enum PushRequestDecoding: Sendable, Equatable {
    /// A valid request.
    case request(PushRequest)
    /// The record goes whole to the dead-letter topic.
    case deadLetter(DeadLetter)
}
