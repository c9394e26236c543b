import Observability
import Synchronization

/// Hands out the provider JWT for `authorization: bearer …`: signed once, reused, refreshed when old.
///
/// Apple asks for a token to be refreshed no less than once an hour and no more than once every
/// 20 minutes per connection (else 429 `TooManyProviderTokenUpdates`). The default refresh age is
/// 50 minutes; a configured interval below 20 minutes is raised to 20.
///
/// On 403 `ExpiredProviderToken`, call `invalidate(_:)` with the rejected JWT. Chosen rule: the JWT
/// is replaced only if it is at least 20 minutes old (`minimumRefreshSeconds`). A younger token that
/// APNs calls expired means our clock is more than 40 minutes behind Apple's; a new token would
/// carry the same wrong clock and could trip `TooManyProviderTokenUpdates`, so it is kept and
/// `invalidate` returns false (the caller reports the failure instead of retrying forever).
///
/// Thread-safe (`Locked`). Signing happens under the lock, at most once per refresh interval.
/// Use one provider per connection or pool as Apple's 20-minute rule requires.
public final class APNsTokenProvider: Sendable {
    /// The floor on token age before a new one may be signed: 20 minutes.
    public static let minimumRefreshSeconds: Int64 = 20 * 60
    /// The default refresh age: 50 minutes.
    public static let defaultRefreshSeconds: Int64 = 50 * 60

    private struct State {
        var jwt: String?
        var issuedAt: Int64 = 0
        var isInvalidated = false
    }

    private let signer: JWTSigner
    private let clock: @Sendable () -> Int64
    private let state = Locked(State())

    /// Age in seconds after which the token is re-signed (never below `minimumRefreshSeconds`).
    public let refreshIntervalSeconds: Int64

    /// Creates a provider. `clock` returns Unix seconds (injectable for tests).
    public init(
        signer: JWTSigner,
        refreshIntervalSeconds: Int64 = APNsTokenProvider.defaultRefreshSeconds,
        clock: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() / 1000 }
    ) {
        self.signer = signer
        self.clock = clock
        self.refreshIntervalSeconds = max(refreshIntervalSeconds, Self.minimumRefreshSeconds)
    }

    /// The JWT to send now: the cached one, or a freshly signed one when it is due for refresh.
    public func currentToken() throws(APNsKeyError) -> String {
        let now = clock()
        return try state.withLock { (state: inout State) throws(APNsKeyError) -> String in
            if let jwt = state.jwt, !state.isInvalidated, now - state.issuedAt < refreshIntervalSeconds {
                return jwt
            }
            let jwt = try signer.sign(issuedAt: now)
            state = State(jwt: jwt, issuedAt: now, isInvalidated: false)
            return jwt
        }
    }

    /// The `authorization` header value: `bearer <jwt>`.
    public func authorizationHeaderValue() throws(APNsKeyError) -> String {
        "bearer " + (try currentToken())
    }

    /// `iat` of the cached token, or nil before the first one is signed.
    public var issuedAt: Int64? {
        state.withLock { $0.jwt == nil ? nil : $0.issuedAt }
    }

    /// Reports that APNs answered `ExpiredProviderToken` for `jwt` (the token or `bearer <token>`).
    /// Returns true when the next `currentToken()` will differ from `jwt` (it was replaced already, or
    /// it is at least 20 minutes old and is now discarded); false when it is kept (see the type's notes).
    @discardableResult
    public func invalidate(_ jwt: String) -> Bool {
        let token = jwt.hasPrefix("bearer ") ? String(jwt.dropFirst(7)) : jwt
        let now = clock()
        return state.withLock { state in
            guard state.jwt == token, !state.isInvalidated else { return true }
            guard now - state.issuedAt >= Self.minimumRefreshSeconds else { return false }
            state.isInvalidated = true
            return true
        }
    }
}
