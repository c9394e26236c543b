import Observability
import APNs
import HTTP2

/// Turns the pool's answer for one notification into the result the contract publishes
/// (§3) and, for tokens APNs calls invalid, the invalid-token record (§4).
///
/// The one place where APNs answers become outcomes: the pipeline and `apns-bridge send` share it.
struct APNsAnswerInterpreter: Sendable {
    /// Request-level facts every result repeats.
    struct RequestFacts: Sendable {
        var requestID: String
        var app: String
        var environment: PushEnvironment
        var source: RecordSource
        /// The record's usable Kafka timestamp (`RecordTimestamp.usable`), nil for `latency_ms: null`.
        var startedAtMilliseconds: Int64?
    }

    /// The result, and the invalid-token record when APNs found the token invalid.
    static func interpret(
        _ answer: APNsDeliveryResult,
        notification: APNsNotification,
        request: RequestFacts,
        nowMicroseconds: Int64 = Timestamp.nowMicroseconds()
    ) -> (PushResult, InvalidTokenRecord?) {
        let now = nowMicroseconds / 1000
        var result = PushResult(
            requestID: request.requestID, app: request.app, token: notification.token, outcome: .failed,
            attempts: answer.attempts, latencyMilliseconds: RecordTimestamp.latencyMilliseconds(from: request.startedAtMilliseconds, nowMicroseconds: nowMicroseconds),
            source: request.source, completedAtMilliseconds: now
        )
        var invalidToken: InvalidTokenRecord?
        switch answer.outcome {
        case .response(let response):
            result.status = response.status
            result.reason = response.reason?.rawValue
            result.apnsID = response.apnsID
            result.apnsUniqueID = response.apnsUniqueID
            result.unregisteredAt = response.timestamp
            switch APNsResponseClassifier.classify(response) {
            case .delivered:
                result.outcome = .delivered
            case .rejected(let isInvalidToken):
                result.outcome = .rejected
                if isInvalidToken {
                    invalidToken = InvalidTokenRecord(
                        token: notification.token, app: request.app, topic: notification.topic,
                        environment: request.environment, reason: result.reason ?? "Unknown",
                        unregisteredAt: response.timestamp, requestID: request.requestID, observedAtMilliseconds: now
                    )
                }
            case .retry, .refreshTokenAndRetry:
                // Retried by the pool until `max_attempts` or the expiration: this was the last answer.
                result.outcome = .failed
            }
        case .failure(let failure):
            result.outcome = .failed
            result.reason = failure.resultReason
        case .expired:
            result.outcome = .expired
            result.reason = "Expired"
            result.attempts = 0
        }
        return (result, invalidToken)
    }
}

extension HTTP2StreamFailure {
    /// The `reason` a `failed` result reports for a transport failure.
    var resultReason: String {
        switch self {
        case .refused: "StreamRefused"
        case .reset(let code): "StreamReset(\(code))"
        case .connectionLost: "ConnectionLost"
        case .timeout: "Timeout"
        }
    }
}
