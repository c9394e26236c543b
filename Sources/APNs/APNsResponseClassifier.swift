/// What to do with an APNs answer.
public enum APNsResponseClass: Sendable, Equatable {
    /// 200: delivered to APNs.
    case delivered
    /// Final: retrying cannot help. `invalidToken` marks tokens to publish on the invalid-tokens topic.
    case rejected(invalidToken: Bool)
    /// Transient (429, every 5xx): retry with backoff.
    case retry
    /// 403 ExpiredProviderToken: sign a fresh JWT (`APNsTokenProvider.invalidate`), then retry.
    case refreshTokenAndRetry
}

/// The one table from (status, reason) to `APNsResponseClass` (contract §3, §4, §6).
public enum APNsResponseClassifier {
    /// Classifies an answer.
    public static func classify(status: Int, reason: APNsReason?) -> APNsResponseClass {
        switch (status, reason) {
        case (200, _):
            .delivered
        case (410, .unregistered?), (410, .expiredToken?),
             (400, .badDeviceToken?), (400, .deviceTokenNotForTopic?):
            .rejected(invalidToken: true)
        case (403, .expiredProviderToken?):
            .refreshTokenAndRetry
        case (429, _), (500...599, _):
            .retry
        default:
            .rejected(invalidToken: false)
        }
    }

    /// Classifies a parsed response.
    public static func classify(_ response: APNsResponse) -> APNsResponseClass {
        classify(status: response.status, reason: response.reason)
    }
}
