/// The `reason` of an APNs error answer, as listed in Apple's "Handling notification responses".
///
/// Unknown strings are kept as `.unknown`, so a reason Apple adds later is reported, not lost.
public enum APNsReason: Hashable, Sendable, CustomStringConvertible {
    // 400
    /// `BadCollapseId`.
    case badCollapseId
    /// `BadDeviceToken`.
    case badDeviceToken
    /// `BadExpirationDate`.
    case badExpirationDate
    /// `BadMessageId`.
    case badMessageId
    /// `BadPriority`.
    case badPriority
    /// `BadTopic`.
    case badTopic
    /// `DeviceTokenNotForTopic`.
    case deviceTokenNotForTopic
    /// `DuplicateHeaders`.
    case duplicateHeaders
    /// `IdleTimeout`.
    case idleTimeout
    /// `InvalidPushType`.
    case invalidPushType
    /// `MissingDeviceToken`.
    case missingDeviceToken
    /// `MissingTopic`.
    case missingTopic
    /// `PayloadEmpty`.
    case payloadEmpty
    /// `TopicDisallowed`.
    case topicDisallowed
    // 403
    /// `BadCertificate`.
    case badCertificate
    /// `BadCertificateEnvironment`.
    case badCertificateEnvironment
    /// `ExpiredProviderToken`.
    case expiredProviderToken
    /// `Forbidden`.
    case forbidden
    /// `InvalidProviderToken`.
    case invalidProviderToken
    /// `MissingProviderToken`.
    case missingProviderToken
    /// `UnrelatedKeyIdInToken`.
    case unrelatedKeyIdInToken
    /// `BadEnvironmentKeyIdInToken`.
    case badEnvironmentKeyIdInToken
    /// `BadEnvironmentKeyInToken` (known to APNSwift; not in Apple's current list).
    case badEnvironmentKeyInToken
    // 404
    /// `BadPath`.
    case badPath
    // 405
    /// `MethodNotAllowed`.
    case methodNotAllowed
    // 410
    /// `ExpiredToken`.
    case expiredToken
    /// `Unregistered`.
    case unregistered
    // 413
    /// `PayloadTooLarge`.
    case payloadTooLarge
    // 429
    /// `TooManyProviderTokenUpdates`.
    case tooManyProviderTokenUpdates
    /// `TooManyRequests`.
    case tooManyRequests
    // 500
    /// `InternalServerError`.
    case internalServerError
    // 503
    /// `ServiceUnavailable`.
    case serviceUnavailable
    /// `Shutdown`.
    case shutdown
    /// A reason this code does not know, kept verbatim.
    case unknown(String)

    /// Every known reason (without `.unknown`).
    public static let allKnown: [APNsReason] = [
        .badCollapseId,
        .badDeviceToken,
        .badExpirationDate,
        .badMessageId,
        .badPriority,
        .badTopic,
        .deviceTokenNotForTopic,
        .duplicateHeaders,
        .idleTimeout,
        .invalidPushType,
        .missingDeviceToken,
        .missingTopic,
        .payloadEmpty,
        .topicDisallowed,
        .badCertificate,
        .badCertificateEnvironment,
        .expiredProviderToken,
        .forbidden,
        .invalidProviderToken,
        .missingProviderToken,
        .unrelatedKeyIdInToken,
        .badEnvironmentKeyIdInToken,
        .badEnvironmentKeyInToken,
        .badPath,
        .methodNotAllowed,
        .expiredToken,
        .unregistered,
        .payloadTooLarge,
        .tooManyProviderTokenUpdates,
        .tooManyRequests,
        .internalServerError,
        .serviceUnavailable,
        .shutdown,
    ]

    /// Parses Apple's spelling; unknown spellings become `.unknown(text)`.
    public init(_ text: String) {
        switch text {
        case "BadCollapseId": self = .badCollapseId
        case "BadDeviceToken": self = .badDeviceToken
        case "BadExpirationDate": self = .badExpirationDate
        case "BadMessageId": self = .badMessageId
        case "BadPriority": self = .badPriority
        case "BadTopic": self = .badTopic
        case "DeviceTokenNotForTopic": self = .deviceTokenNotForTopic
        case "DuplicateHeaders": self = .duplicateHeaders
        case "IdleTimeout": self = .idleTimeout
        case "InvalidPushType": self = .invalidPushType
        case "MissingDeviceToken": self = .missingDeviceToken
        case "MissingTopic": self = .missingTopic
        case "PayloadEmpty": self = .payloadEmpty
        case "TopicDisallowed": self = .topicDisallowed
        case "BadCertificate": self = .badCertificate
        case "BadCertificateEnvironment": self = .badCertificateEnvironment
        case "ExpiredProviderToken": self = .expiredProviderToken
        case "Forbidden": self = .forbidden
        case "InvalidProviderToken": self = .invalidProviderToken
        case "MissingProviderToken": self = .missingProviderToken
        case "UnrelatedKeyIdInToken": self = .unrelatedKeyIdInToken
        case "BadEnvironmentKeyIdInToken": self = .badEnvironmentKeyIdInToken
        case "BadEnvironmentKeyInToken": self = .badEnvironmentKeyInToken
        case "BadPath": self = .badPath
        case "MethodNotAllowed": self = .methodNotAllowed
        case "ExpiredToken": self = .expiredToken
        case "Unregistered": self = .unregistered
        case "PayloadTooLarge": self = .payloadTooLarge
        case "TooManyProviderTokenUpdates": self = .tooManyProviderTokenUpdates
        case "TooManyRequests": self = .tooManyRequests
        case "InternalServerError": self = .internalServerError
        case "ServiceUnavailable": self = .serviceUnavailable
        case "Shutdown": self = .shutdown
        default: self = .unknown(text)
        }
    }

    /// Apple's spelling of the reason.
    public var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: "BadEnvironmentKeyIdInToken"
        case .badEnvironmentKeyInToken: "BadEnvironmentKeyInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .unknown(let text): text
        }
    }

    /// The HTTP status Apple answers with this reason (nil for `.unknown`).
    public var status: Int? {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic, .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken, .missingTopic, .payloadEmpty, .topicDisallowed: 400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken: 403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .expiredToken, .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        case .unknown: nil
        }
    }

    public var description: String { rawValue }
}
