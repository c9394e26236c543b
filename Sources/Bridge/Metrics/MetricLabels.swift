import APNs

/// The bounded value sets of the labels whose values come from outside the program (APNs'
/// answers, retry causes, dead-letter codes), and their mapping to table indexes.
///
/// A metric label never carries a device token, request id or any other unbounded value: what is
/// not in a set below is counted as `other`, so a peer that invents statuses or reasons cannot
/// create new series.
enum MetricLabels {
    /// The value for anything outside a known set.
    static let other = "other"

    /// HTTP statuses Apple documents for APNs answers.
    static let apnsStatuses = [200, 400, 403, 404, 405, 410, 413, 429, 500, 503]

    /// The 403 reasons that say an app's credentials are refused: every documented one but
    /// `ExpiredProviderToken`, which the bridge answers with a fresh token. Their series exist
    /// from the start (at zero), so that an alert on them sees the first refusal as an increase.
    static let credentialRefusalReasons: [APNsReason] = [
        .badCertificate, .badCertificateEnvironment, .forbidden, .invalidProviderToken, .missingProviderToken,
        .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken,
    ]

    /// `status` label values: the documented statuses, then `4xx` and `5xx` for the statuses of
    /// those classes Apple does not document (a proxy's 502 or 504: an alert on `status=~"5.."`
    /// sees them), then `other`.
    static let statusValues = apnsStatuses.map(String.init) + ["4xx", "5xx", other]

    /// `reason` label values: `none` (no reason, as in a 200), Apple's documented reasons, `other`.
    static let reasonValues = ["none"] + APNsReason.allKnown.map(\.rawValue) + [other]

    private static let statusIndexes = Dictionary(uniqueKeysWithValues: apnsStatuses.enumerated().map { ($1, $0) })
    private static let reasonIndexes = Dictionary(
        uniqueKeysWithValues: APNsReason.allKnown.enumerated().map { ($1.rawValue, $0 + 1) })

    /// The index of a status in `statusValues`.
    static func statusIndex(_ status: Int) -> Int {
        if status == 200 { return 0 }  // the common answer without hashing
        if let index = statusIndexes[status] { return index }
        switch status {
        case 400..<500: return apnsStatuses.count
        case 500..<600: return apnsStatuses.count + 1
        default: return apnsStatuses.count + 2
        }
    }

    /// The index of a reason in `reasonValues` (`nil` → `none`; an unknown string → `other`).
    static func reasonIndex(_ reason: String?) -> Int {
        guard let reason else { return 0 }
        return reasonIndexes[reason] ?? reasonValues.count - 1
    }

    /// The cell of (status, reason) in a table of `statusValues.count × reasonValues.count`.
    static func responseIndex(status: Int, reason: String?) -> Int {
        statusIndex(status) * reasonValues.count + reasonIndex(reason)
    }

    /// The index of an outcome in `PushOutcome.allCases` (declaration order).
    static func outcomeIndex(_ outcome: PushOutcome) -> Int {
        switch outcome {
        case .delivered: 0
        case .rejected: 1
        case .failed: 2
        case .expired: 3
        case .invalid: 4
        }
    }

    /// `cause` label values: the pool's retry causes (`APNsRetryCause` raw values).
    static let retryCauses = APNsRetryCause.allCases.map(\.rawValue)
    private static let retryCauseIndexes = Dictionary(
        uniqueKeysWithValues: APNsRetryCause.allCases.enumerated().map { ($1, $0) })

    /// The index of a cause in `retryCauses`.
    static func retryCauseIndex(_ cause: APNsRetryCause) -> Int {
        // invariant: the table holds every case.
        retryCauseIndexes[cause]!
    }

    /// `reason` label values of connection closes (a shutdown's are not counted).
    static let connectionCloseReasons = [
        "goaway", "lost", "ping_timeout", "connect_failed", "no_streams_allowed", "stream_ids_exhausted",
    ]

    /// The index of a close reason in `connectionCloseReasons`; nil for a shutdown's.
    static func connectionCloseReasonIndex(_ reason: APNsConnectionCloseReason) -> Int? {
        switch reason {
        case .goAway: 0
        case .lost: 1
        case .pingTimeout: 2
        case .connectFailed: 3
        case .noStreamsAllowed: 4
        case .streamIDsExhausted: 5
        case .shutdown: nil
        }
    }

    /// Reasons an invalid-token record carries (contract §4), then `other`.
    static let invalidTokenReasons = ["Unregistered", "ExpiredToken", "BadDeviceToken", "DeviceTokenNotForTopic", other]
    private static let invalidTokenIndexes = Dictionary(
        uniqueKeysWithValues: invalidTokenReasons.enumerated().map { ($1, $0) })

    /// The index of a reason in `invalidTokenReasons`.
    static func invalidTokenReasonIndex(_ reason: String) -> Int {
        invalidTokenIndexes[reason] ?? invalidTokenReasons.count - 1
    }

    /// Dead-letter codes (contract §5), then `other`.
    static let deadLetterCodes = [
        DeadLetterCode.invalidJSON, .invalidRequest, .unknownApp, .payloadTooLarge, .tooManyTokens,
    ].map(\.rawValue) + [other]
    private static let deadLetterIndexes = Dictionary(uniqueKeysWithValues: deadLetterCodes.enumerated().map { ($1, $0) })

    /// The index of a code in `deadLetterCodes`.
    static func deadLetterIndex(_ code: DeadLetterCode) -> Int {
        deadLetterIndexes[code.rawValue] ?? deadLetterCodes.count - 1
    }
}
