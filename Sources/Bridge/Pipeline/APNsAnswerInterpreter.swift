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

    /// The result; `invalidToken` is set when APNs found the token invalid.
    ///
    /// Each result is made once, with every field, in the branch that knows them: a result made
    /// early and filled in field by field was copied whole on return (its six strings retained
    /// and released once more per notification).
    static func interpret(
        _ answer: APNsDeliveryResult,
        notification: APNsNotification,
        context: RequestContext,
        nowMicroseconds: Int64 = Timestamp.nowMicroseconds(),
        invalidToken: inout InvalidTokenRecord?
    ) -> PushResult {
        // Each fact is read where it is used, from the context: a copy of all of them for the
        // call cost five retains and releases per notification.
        let now = nowMicroseconds / 1000
        let latency = RecordTimestamp.latencyMilliseconds(from: context.startedAtMilliseconds, nowMicroseconds: nowMicroseconds)
        func result(_ outcome: PushOutcome, reason: String?, attempts: Int, response: APNsResponse? = nil) -> PushResult {
            PushResult(
                requestID: context.requestID, app: context.app, token: notification.token, outcome: outcome,
                status: response?.status, reason: reason, apnsID: response?.apnsID, apnsUniqueID: response?.apnsUniqueID,
                unregisteredAt: response?.timestamp, attempts: attempts, latencyMilliseconds: latency,
                source: context.source, completedAtMilliseconds: now
            )
        }
        switch answer.outcome {
        case .response(let response):
            let reason = response.reason?.rawValue
            switch APNsResponseClassifier.classify(response) {
            case .delivered:
                return result(.delivered, reason: reason, attempts: answer.attempts, response: response)
            case .rejected(let isInvalidToken):
                if isInvalidToken {
                    invalidToken = InvalidTokenRecord(
                        token: notification.token, app: context.app, topic: notification.topic,
                        environment: context.facts.environment, reason: reason ?? "Unknown",
                        unregisteredAt: response.timestamp, requestID: context.requestID, observedAtMilliseconds: now
                    )
                }
                return result(.rejected, reason: reason, attempts: answer.attempts, response: response)
            case .retry, .refreshTokenAndRetry:
                // Retried by the pool until `max_attempts` or the expiration: this was the last
                // answer, and `reason` says its cause even when the body named none.
                return result(.failed, reason: reason ?? Self.cause(ofStatus: response.status),
                              attempts: answer.attempts, response: response)
            }
        case .failure(let failure):
            return result(.failed, reason: failure.resultReason, attempts: answer.attempts)
        case .expired:
            return result(.expired, reason: "Expired", attempts: 0)
        }
    }
}

extension APNsAnswerInterpreter {
    /// The `reason` of a `failed` result whose last answer carried none (an empty or non-JSON
    /// body, e.g. a proxy's error page): Apple's name for the status, or `UnexpectedStatus(<status>)`.
    static func cause(ofStatus status: Int) -> String {
        switch status {
        case 429: APNsReason.tooManyRequests.rawValue
        case 500: APNsReason.internalServerError.rawValue
        case 503: APNsReason.serviceUnavailable.rawValue
        default: "UnexpectedStatus(\(status))"
        }
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
