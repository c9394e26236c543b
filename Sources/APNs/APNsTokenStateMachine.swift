/// When the provider JWT is re-signed and when a connection changes the token it sends, apart
/// from signing and locks (contract §7).
///
/// Rules: one JWT per key at a time for connections that take one; each connection keeps the
/// token it took until that token is `refreshSeconds` old (50 minutes by default, never below
/// 41). APNs answers 429 TooManyProviderTokenUpdates to a connection that changes tokens within
/// 20 minutes, so a connection only takes the newest token while it can keep it 21 minutes (20
/// and a minute for the clocks and the network: whole-second `iat`, Apple timing from its own
/// receipt), no older than `refreshSeconds` − 21 minutes; otherwise a new one is signed for it,
/// which later connections share. New tokens are therefore at least 20 minutes apart. The token
/// is re-signed at once, whatever its age, after APNs answers 403 ExpiredProviderToken to the
/// newest token, but only once in a row: a token signed for that reason that is itself called
/// expired is kept until it is 20 minutes old (our clock is then far behind Apple's, and a new
/// token would carry the same error). A connection whose token APNs called expired takes
/// another at once.
struct APNsTokenStateMachine {
    /// Apple's floor on how often a token changes: 20 minutes.
    static let minimumRefreshSeconds: Int64 = 20 * 60
    /// How long a connection keeps a token it took, at least: Apple's 20 minutes and a minute.
    static let minimumKeepSeconds: Int64 = minimumRefreshSeconds + 60
    /// The floor on `refreshSeconds`: a token is kept 21 minutes by each connection and shared
    /// for 20 before the next is signed.
    static let minimumRefreshIntervalSeconds: Int64 = minimumKeepSeconds + minimumRefreshSeconds

    /// A signed token.
    struct Token: Equatable {
        var jwt: String
        var issuedAt: Int64
        /// Increases with each signed token; streams remember it to report ExpiredProviderToken.
        var generation: UInt64
        /// Signed because APNs called the previous token expired.
        var forced: Bool
    }

    /// Age (seconds) at which a connection stops sending a token.
    let refreshSeconds: Int64
    /// The newest token.
    private(set) var current: Token?
    private var refreshRequested = false
    /// APNs called the token of this generation expired: it and older ones are not kept.
    private var retiredThrough: UInt64 = 0

    init(refreshSeconds: Int64) {
        self.refreshSeconds = max(refreshSeconds, Self.minimumRefreshIntervalSeconds)
    }

    /// Whether a connection that sends the token of `generation`, signed at `issuedAt`, goes on
    /// sending it at `now`.
    func keeps(generation: UInt64, issuedAt: Int64, now: Int64) -> Bool {
        generation > retiredThrough && now - issuedAt < refreshSeconds
    }

    /// The token a connection that needs one takes at `now`: the newest, while it can be kept
    /// for `minimumKeepSeconds`; nil when one must be signed (then call `signed`).
    func tokenToTake(now: Int64) -> Token? {
        guard let current, !refreshRequested, current.generation > retiredThrough,
              now - current.issuedAt <= refreshSeconds - Self.minimumKeepSeconds else { return nil }
        return current
    }

    /// A token was signed at `now`.
    mutating func signed(_ jwt: String, now: Int64) {
        let generation = (current?.generation ?? 0) + 1
        current = Token(jwt: jwt, issuedAt: now, generation: generation, forced: refreshRequested)
        refreshRequested = false
    }

    /// APNs answered ExpiredProviderToken to a stream sent with token `generation`. Returns true
    /// when the next stream of that connection will carry a different token (a newer one exists,
    /// or one is signed now).
    mutating func expiredProviderToken(generation: UInt64, now: Int64) -> Bool {
        guard let current else { return true }
        guard current.generation == generation else {
            // An older token: its connections take the newest (or a fresh one) from now on.
            retiredThrough = max(retiredThrough, generation)
            return true
        }
        if refreshRequested { return true }
        if current.forced && now - current.issuedAt < Self.minimumRefreshSeconds { return false }
        refreshRequested = true
        retiredThrough = max(retiredThrough, generation)
        return true
    }
}
