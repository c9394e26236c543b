/// The final outcome for one token of a request (contract §3).
public enum PushOutcome: String, Sendable, Hashable, CaseIterable {
    /// APNs answered 200.
    case delivered
    /// APNs answered with a status retrying cannot fix.
    case rejected
    /// Retries exhausted or the deadline passed.
    case failed
    /// Not sent because `expiration` had passed.
    case expired
    /// The token string is not a device token; not sent.
    case invalid
}

/// One record for `apns.results` (contract §3).
///
/// Optional properties that hold references are declared `Optional<…>`, not `…?`: a `var x: T?`
/// starts out as nil, and the compiler then copied and destroyed the whole value at the end of
/// every `init` (docs/BENCHMARKS.md).
public struct PushResult: Sendable, Equatable {
    /// The request's `id`.
    public var requestID: String
    /// The app name.
    public var app: String
    /// The device token (as normalised, or as given for `invalid`).
    public var token: String
    /// The outcome.
    public var outcome: PushOutcome
    /// APNs's HTTP status, if an answer arrived.
    public var status: Int?
    /// Apple's reason, or the bridge's last cause for `failed`, `BadDeviceToken` for `invalid`.
    public var reason: Optional<String>
    /// `apns-id` of the answer.
    public var apnsID: Optional<String>
    /// `apns-unique-id` of the answer (sandbox only).
    public var apnsUniqueID: Optional<String>
    /// Apple's 410 `timestamp` (ms since the epoch).
    public var unregisteredAt: Int64?
    /// Attempts made (0 when never sent).
    public var attempts: Int
    /// From the record's Kafka timestamp to the final answer; nil when the record had no usable
    /// timestamp (none, or more than a day from the bridge's clock).
    public var latencyMilliseconds: Double?
    /// The input record.
    public var source: RecordSource
    /// When the outcome became final (ms since the epoch).
    public var completedAtMilliseconds: Int64

    /// Creates a result.
    public init(requestID: String, app: String, token: String, outcome: PushOutcome, status: Int? = nil,
                reason: String? = nil, apnsID: String? = nil, apnsUniqueID: String? = nil, unregisteredAt: Int64? = nil,
                attempts: Int, latencyMilliseconds: Double?, source: RecordSource, completedAtMilliseconds: Int64) {
        self.requestID = requestID
        self.app = app
        self.token = token
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.unregisteredAt = unregisteredAt
        self.attempts = attempts
        self.latencyMilliseconds = latencyMilliseconds
        self.source = source
        self.completedAtMilliseconds = completedAtMilliseconds
    }
}

/// One record for `apns.invalid-tokens` (contract §4).
public struct InvalidTokenRecord: Sendable, Equatable {
    /// The token (also the record key).
    public var token: String
    /// The app name.
    public var app: String
    /// The `apns-topic` the notification was (or would have been) sent with.
    public var topic: String
    /// The environment.
    public var environment: PushEnvironment
    /// `Unregistered`, `ExpiredToken`, `BadDeviceToken` or `DeviceTokenNotForTopic`.
    public var reason: String
    /// Apple's 410 `timestamp` (ms since the epoch), if any.
    public var unregisteredAt: Int64?
    /// The request's `id`.
    public var requestID: String
    /// When the bridge learned it (ms since the epoch).
    public var observedAtMilliseconds: Int64

    /// Creates a record.
    public init(token: String, app: String, topic: String, environment: PushEnvironment, reason: String,
                unregisteredAt: Int64? = nil, requestID: String, observedAtMilliseconds: Int64) {
        self.token = token
        self.app = app
        self.topic = topic
        self.environment = environment
        self.reason = reason
        self.unregisteredAt = unregisteredAt
        self.requestID = requestID
        self.observedAtMilliseconds = observedAtMilliseconds
    }
}
