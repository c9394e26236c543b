import HTTP2

/// What APNs (or the transport) said to one request: an answer, or a stream that ended without one.
public enum APNsAnswer: Sendable {
    /// APNs answered (any status).
    case response(APNsResponse)
    /// The stream ended without an answer.
    case failure(HTTP2StreamFailure)
}

/// The final outcome of one notification given to an `APNsClient`, after its retries.
public struct APNsDeliveryResult: Sendable {
    /// How it ended.
    public enum Outcome: Sendable {
        /// APNs's last answer (final, or the last of a retried series that ran out of attempts or time).
        case response(APNsResponse)
        /// The last request ended without an answer (connection lost, timeout, reset, or the pool shut down).
        case failure(HTTP2StreamFailure)
        /// Never sent: its `expiration` passed while it waited for a connection.
        case expired
    }

    /// How it ended.
    public var outcome: Outcome
    /// Requests APNs saw for it (re-sends of refused streams not counted; 0 when never sent).
    public var attempts: Int

    /// Creates a result.
    public init(outcome: Outcome, attempts: Int) {
        self.outcome = outcome
        self.attempts = attempts
    }
}

/// Why a notification is sent again: the `cause` label of `apns_retries_total` (stable raw values).
public enum APNsRetryCause: String, Sendable, CaseIterable {
    /// 429 (TooManyRequests, TooManyProviderTokenUpdates).
    case status429 = "status_429"
    /// Any 5xx.
    case status5xx = "status_5xx"
    /// The connection was lost while the stream was open.
    case connectionLost = "connection_lost"
    /// RST_STREAM with a code other than REFUSED_STREAM (e.g. INTERNAL_ERROR): the request may
    /// have been processed.
    case streamReset = "stream_reset"
    /// No answer within `apns.request_timeout`.
    case timeout = "timeout"
    /// 403 ExpiredProviderToken: re-sent with a fresh JWT.
    case expiredProviderToken = "expired_provider_token"
    /// REFUSED_STREAM: not processed, not an attempt.
    case refused = "refused"
    /// Above a GOAWAY's last-stream-id: not processed, not an attempt.
    case goAway = "goaway"

    /// Whether APNs may have processed the request (so it counts as an attempt).
    public var countsAsAttempt: Bool {
        switch self {
        case .refused, .goAway: false
        default: true
        }
    }
}

/// What the pool does with one answer.
enum APNsAnswerDisposition: Equatable {
    /// Final: report it.
    case final
    /// Send it again (after a backoff) for `cause`.
    case retry(APNsRetryCause)

    /// The one table from answers to dispositions (contract §6). `afterGoAway` tells a stream
    /// refused because of a GOAWAY's last-stream-id from a REFUSED_STREAM reset.
    static func of(_ answer: APNsAnswer, afterGoAway: Bool) -> APNsAnswerDisposition {
        switch answer {
        case .response(let response):
            switch APNsResponseClassifier.classify(response) {
            case .delivered, .rejected: return .final
            case .retry: return .retry(response.status == 429 ? .status429 : .status5xx)
            case .refreshTokenAndRetry: return .retry(.expiredProviderToken)
            }
        case .failure(.refused):
            return .retry(afterGoAway ? .goAway : .refused)
        case .failure(.timeout):
            return .retry(.timeout)
        case .failure(.connectionLost):
            return .retry(.connectionLost)
        case .failure(.reset):
            return .retry(.streamReset)
        }
    }
}

/// The states of a pool connection, as counted by `APNsClient.connectionStates`.
public enum APNsConnectionStateName: String, Sendable, CaseIterable {
    /// Opening TCP + TLS, waiting for the server's SETTINGS.
    case connecting
    /// Taking streams.
    case ready
    /// GOAWAY received or closing: finishing its streams, taking no new ones.
    case draining
    /// Waiting before reconnecting.
    case backoff
    /// Not connected and not going to (before `start`, after `shutdown`).
    case closed
}

/// Why the pool closed (or lost) a connection.
public enum APNsConnectionCloseReason: Sendable, Equatable {
    /// A PING was not acknowledged within `apns.ping_timeout`.
    case pingTimeout
    /// The server sent GOAWAY and the last stream finished.
    case goAway
    /// Its stream ids are used up.
    case streamIDsExhausted
    /// The server allowed no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0) for a whole request timeout.
    case noStreamsAllowed
    /// The pool is shutting down.
    case shutdown
    /// The connection could not be opened (DNS, TCP, TLS, ALPN, first SETTINGS): the text says why.
    case connectFailed(String)
    /// The peer or the network ended it: the text says why.
    case lost(String)

    /// Whether the connection counts as a failure for the reconnect backoff.
    var isFailure: Bool {
        switch self {
        case .goAway, .streamIDsExhausted, .shutdown: false
        case .pingTimeout, .noStreamsAllowed, .connectFailed, .lost: true
        }
    }
}
