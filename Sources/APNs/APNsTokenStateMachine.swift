/// When the provider JWT is re-signed, apart from signing and locks (contract §7).
///
/// Rules: one JWT per key, reused by every connection; re-signed once it is `refreshSeconds` old
/// (50 minutes by default, never below 20: APNs answers 429 TooManyProviderTokenUpdates to a
/// connection that switches tokens more often); re-signed at once, whatever its age, after APNs
/// answers 403 ExpiredProviderToken to the current token, but only once in a row: a token signed
/// for that reason that is itself called expired is kept until it is 20 minutes old (our clock
/// is then far behind Apple's, and a new token would carry the same error).
struct APNsTokenStateMachine {
    /// The floor on a token's age before a routine refresh: 20 minutes.
    static let minimumRefreshSeconds: Int64 = 20 * 60

    /// The token in use.
    struct Token: Equatable {
        var jwt: String
        var issuedAt: Int64
        /// Increases with each signed token; streams remember it to report ExpiredProviderToken.
        var generation: UInt64
        /// Signed because APNs called the previous token expired.
        var forced: Bool
    }

    /// Age (seconds) at which a token is re-signed.
    let refreshSeconds: Int64
    private(set) var current: Token?
    private var refreshRequested = false

    init(refreshSeconds: Int64) {
        self.refreshSeconds = max(refreshSeconds, Self.minimumRefreshSeconds)
    }

    /// The token to use at `now`, or nil when one must be signed (then call `signed`).
    func usableToken(now: Int64) -> Token? {
        guard let current, !refreshRequested, now - current.issuedAt < refreshSeconds else { return nil }
        return current
    }

    /// A token was signed at `now`.
    mutating func signed(_ jwt: String, now: Int64) {
        let generation = (current?.generation ?? 0) + 1
        current = Token(jwt: jwt, issuedAt: now, generation: generation, forced: refreshRequested)
        refreshRequested = false
    }

    /// APNs answered ExpiredProviderToken to a stream sent with token `generation`. Returns true
    /// when the next stream will carry a different token (already replaced, or replaced now).
    mutating func expiredProviderToken(generation: UInt64, now: Int64) -> Bool {
        guard let current, current.generation == generation else { return true }
        if refreshRequested { return true }
        if current.forced && now - current.issuedAt < Self.minimumRefreshSeconds { return false }
        refreshRequested = true
        return true
    }
}
