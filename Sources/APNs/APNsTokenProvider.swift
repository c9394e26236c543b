import Observability

/// Hands out the provider JWT for `authorization: bearer …`: one key's tokens, for every
/// connection of every pool that uses the key. Each connection keeps the token it took until it
/// is 50 minutes old and takes the newest then; a connection that first sends late gets a token
/// it can keep for 21 minutes, since APNs answers 429 TooManyProviderTokenUpdates to a
/// connection that changes tokens within 20.
///
/// The timing rules live in `APNsTokenStateMachine`. Thread-safe (`Locked`); the lock is taken
/// once per connection per batch of streams, and signing (ECDSA, about a millisecond's tenth)
/// happens under it at most once per refresh.
///
/// Reflection shows the key id and the refresh age only, never the tokens it holds.
public final class APNsTokenProvider: Sendable, CustomReflectable {
    /// The floor on the refresh age: 41 minutes (each connection keeps a token 21 minutes, and
    /// a token is shared for 20 before the next one is signed).
    public static let minimumRefreshSeconds: Int64 = APNsTokenStateMachine.minimumRefreshIntervalSeconds
    /// The default refresh age: 50 minutes.
    public static let defaultRefreshSeconds: Int64 = 50 * 60

    /// A token and its generation (to report ExpiredProviderToken for exactly that token).
    /// Descriptions and reflection never show the token.
    public struct Authorization: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// `bearer <jwt>`.
        public var headerValue: String
        /// Which signed token this is.
        public var generation: UInt64
        /// Its `iat` (Unix seconds).
        public var issuedAt: Int64

        /// Generation and issue time; the header value as `<redacted>`.
        public var description: String {
            "Authorization(headerValue: <redacted>, generation: \(generation), issuedAt: \(issuedAt))"
        }

        /// Same as ``description``: no token.
        public var debugDescription: String { description }

        /// A mirror without the token (so `dump` cannot print it).
        public var customMirror: Mirror {
            Mirror(self, children: ["headerValue": "<redacted>", "generation": generation, "issuedAt": issuedAt],
                   displayStyle: .struct)
        }
    }

    private struct State {
        var machine: APNsTokenStateMachine
        var invalidTokenLogged = false
        /// The newest token generation logged as called expired too soon.
        var expiredTooSoonLogged: UInt64 = 0
    }

    private let signer: JWTSigner
    private let clock: @Sendable () -> Int64
    private let state: Locked<State>

    /// The key id (the only part of the credentials that may be logged).
    public var keyID: String { signer.keyID }

    /// Age in seconds after which the token is re-signed (never below `minimumRefreshSeconds`).
    public var refreshIntervalSeconds: Int64 { state.withLock { $0.machine.refreshSeconds } }

    /// Creates a provider. `clock` returns Unix seconds (injectable for tests).
    public init(
        signer: JWTSigner,
        refreshIntervalSeconds: Int64 = APNsTokenProvider.defaultRefreshSeconds,
        clock: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() / 1000 }
    ) {
        self.signer = signer
        self.clock = clock
        self.state = Locked(State(machine: APNsTokenStateMachine(refreshSeconds: refreshIntervalSeconds)))
    }

    /// The token a connection sends now: `held` (what it sent so far) while it may keep it,
    /// otherwise the newest token when it can be kept for 21 minutes, otherwise a freshly
    /// signed one. Pass nil for a connection that has sent none.
    public func authorization(keeping held: Authorization? = nil) throws(APNsKeyError) -> Authorization {
        let now = clock()
        return try state.withLock { (state: inout State) throws(APNsKeyError) -> Authorization in
            if let held, state.machine.keeps(generation: held.generation, issuedAt: held.issuedAt, now: now) {
                return held
            }
            if let token = state.machine.tokenToTake(now: now) {
                return Authorization(headerValue: "bearer " + token.jwt, generation: token.generation, issuedAt: token.issuedAt)
            }
            let jwt = try signer.sign(issuedAt: now)
            state.machine.signed(jwt, now: now)
            // invariant: `signed` just stored a token.
            return Authorization(headerValue: "bearer " + jwt, generation: state.machine.current!.generation, issuedAt: now)
        }
    }

    /// The JWT a new connection would send now.
    public func currentToken() throws(APNsKeyError) -> String {
        String(try authorization().headerValue.dropFirst(7))
    }

    /// The `authorization` header value: `bearer <jwt>`.
    public func authorizationHeaderValue() throws(APNsKeyError) -> String {
        try authorization().headerValue
    }

    /// `iat` of the newest token, or nil before the first one is signed.
    public var issuedAt: Int64? {
        state.withLock { $0.machine.current?.issuedAt }
    }

    /// APNs answered ExpiredProviderToken to a stream carrying token `generation`. Returns true
    /// when the next token differs (see `APNsTokenStateMachine`).
    @discardableResult
    public func reportExpired(generation: UInt64) -> Bool {
        let now = clock()
        return state.withLock { $0.machine.expiredProviderToken(generation: generation, now: now) }
    }

    /// Reports that APNs answered ExpiredProviderToken for `jwt` (the token or `bearer <token>`).
    @discardableResult
    public func invalidate(_ jwt: String) -> Bool {
        let token = jwt.hasPrefix("bearer ") ? String(jwt.dropFirst(7)) : jwt
        let now = clock()
        return state.withLock { state in
            guard let current = state.machine.current, current.jwt == token else { return true }
            return state.machine.expiredProviderToken(generation: current.generation, now: now)
        }
    }

    /// True the first time for token `generation`: APNs called it expired although it was signed
    /// on APNs' own demand less than 20 minutes before (log it once per token).
    public func shouldLogExpiredTooSoon(generation: UInt64) -> Bool {
        state.withLock { state in
            defer { state.expiredTooSoonLogged = max(state.expiredTooSoonLogged, generation) }
            return state.expiredTooSoonLogged < generation
        }
    }

    /// The key id and the refresh age: `dump` would otherwise walk into the lock's state and print the tokens.
    public var customMirror: Mirror {
        Mirror(self, children: ["keyID": keyID, "refreshIntervalSeconds": refreshIntervalSeconds], displayStyle: .class)
    }

    /// True the first time only: APNs answered InvalidProviderToken (log it once, with the key id).
    public func shouldLogInvalidProviderToken() -> Bool {
        state.withLock { state in
            defer { state.invalidTokenLogged = true }
            return !state.invalidTokenLogged
        }
    }
}
