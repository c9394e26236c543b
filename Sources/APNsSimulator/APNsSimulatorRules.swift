import APNs
import Synchronization
import Observability

/// Apple's validation and answers, as a function from one request (and its connection's
/// authentication state) to the answer. No sockets: the simulator calls it per stream, and tests
/// call it directly.
///
/// Checks, in this order: 405 MethodNotAllowed; 404 BadPath; 400 DuplicateHeaders; 403 provider
/// token (Missing/Invalid/Expired, one team per connection; 429 TooManyProviderTokenUpdates when a
/// connection switches tokens too often under `TokenLimits`); 400 MissingDeviceToken/BadDeviceToken,
/// InvalidPushType, MissingTopic (token auth), BadTopic (empty, or without the push type's suffix),
/// BadPriority (also 10, or no header, for a background push), BadExpirationDate, BadCollapseId, BadMessageId, PayloadEmpty; 413 PayloadTooLarge;
/// 410 Unregistered (+ `timestamp` in ms) for configured tokens; otherwise 200. Every answer carries
/// `apns-id`: the request's, or a generated lowercase UUID v4.
///
/// Verified JWTs are cached (bounded) so ES256 is checked once per token, not per request; cached
/// tokens are still checked for age and team on every use.
public final class APNsSimulatorRules: Sendable {
    /// Decides certificate-auth requests (every request on a connection with a client
    /// certificate; `authorization` is ignored there): nil accepts, a reason rejects. Without a
    /// policy, such requests are answered 403 MissingProviderToken.
    public typealias CertificateAuthPolicy = @Sendable (_ subject: String, _ topic: String?) -> APNsReason?

    private let verifier: JWTVerifier
    private let unregisteredTokens: [String: Int64]
    private let tokenApps: [String: String]
    private let sendsUniqueID: Bool
    private let certificateAuthPolicy: CertificateAuthPolicy?
    private let verifiedTokenCacheLimit: Int
    private let verifiedTokens = Locked<[String: JWTClaims]>([:])
    private let uuids = SimulatorUUIDGenerator()

    /// Creates the rules.
    /// - Parameters:
    ///   - verifier: trusted auth keys (by key id, with team) and the clock for token age.
    ///   - unregisteredTokens: device token (hex, any case) → Unix milliseconds APNs reports in 410 answers.
    ///   - tokenApps: device token (hex, any case) → the bundle id of the app it was issued to; a
    ///     request for it to another app's topic is answered 400 DeviceTokenNotForTopic.
    ///   - sendsUniqueID: add `apns-unique-id` to 200 answers, as the sandbox does.
    ///   - verifiedTokenCacheLimit: at most this many verified JWTs are remembered.
    ///   - certificateAuthPolicy: hook for certificate-auth connections; nil answers them 403 MissingProviderToken.
    public init(
        verifier: JWTVerifier,
        unregisteredTokens: [String: Int64] = [:],
        tokenApps: [String: String] = [:],
        sendsUniqueID: Bool = false,
        verifiedTokenCacheLimit: Int = 1024,
        certificateAuthPolicy: CertificateAuthPolicy? = nil
    ) {
        self.verifier = verifier
        self.unregisteredTokens = Dictionary(
            unregisteredTokens.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.tokenApps = Dictionary(tokenApps.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.sendsUniqueID = sendsUniqueID
        self.verifiedTokenCacheLimit = max(1, verifiedTokenCacheLimit)
        self.certificateAuthPolicy = certificateAuthPolicy
    }

    /// The APNs headers of one request, collected in one pass.
    private struct RequestHeaders {
        var authorization: String?
        var pushType: String?
        var topic: String?
        var priority: String?
        var expiration: String?
        var collapseID: String?
        var apnsID: String?
        var hasDuplicates = false

        init(_ headers: [(name: String, value: String)]) {
            func set(_ slot: inout String?, _ value: String, _ duplicate: inout Bool) {
                if slot != nil { duplicate = true }
                slot = value
            }
            for header in headers {
                switch header.name {
                case "authorization": set(&authorization, header.value, &hasDuplicates)
                case "apns-push-type": set(&pushType, header.value, &hasDuplicates)
                case "apns-topic": set(&topic, header.value, &hasDuplicates)
                case "apns-priority": set(&priority, header.value, &hasDuplicates)
                case "apns-expiration": set(&expiration, header.value, &hasDuplicates)
                case "apns-collapse-id": set(&collapseID, header.value, &hasDuplicates)
                case "apns-id": set(&apnsID, header.value, &hasDuplicates)
                default: break
                }
            }
        }
    }

    /// Tighter provider-token rules than Apple's defaults (fault injection).
    public struct TokenLimits: Sendable, Equatable {
        /// Tokens issued longer ago than this many seconds are expired (Apple: 3600, the verifier's).
        public var maximumAgeSeconds: Int64?
        /// A connection may switch to another token at most once per this many seconds.
        public var updateMinimumIntervalSeconds: Int64?

        /// Creates limits; nil keeps Apple's default (age) or no limit (updates).
        public init(maximumAgeSeconds: Int64? = nil, updateMinimumIntervalSeconds: Int64? = nil) {
            self.maximumAgeSeconds = maximumAgeSeconds
            self.updateMinimumIntervalSeconds = updateMinimumIntervalSeconds
        }
    }

    /// Now on the rules' clock (Unix seconds).
    public var now: Int64 { verifier.clock() }

    /// Answers one request. `connection` may be updated (the team a token binds it to, the token
    /// in use and since when).
    public func answer(_ request: APNsSimulatorRequest, connection: inout APNsConnectionAuthState,
                       tokenLimits: TokenLimits = TokenLimits()) -> APNsSimulatorAnswer {
        let headers = RequestHeaders(request.headers)
        // An invalid apns-id cannot be echoed; answer with a generated one.
        let apnsID = headers.apnsID.flatMap { Self.isValidUUID($0) ? $0 : nil } ?? uuids.next()

        func reject(_ reason: APNsReason, timestamp: Int64? = nil) -> APNsSimulatorAnswer {
            // invariant: every reason the rules emit is a known reason, which has a status.
            let status = reason.status ?? 500
            return APNsSimulatorAnswer(status: status, headers: [(name: "apns-id", value: apnsID)],
                                       body: Self.errorBody(reason, timestamp: timestamp), reason: reason)
        }

        guard request.method == "POST" else { return reject(.methodNotAllowed) }
        let devicePrefix = "/3/device/"
        guard request.path.hasPrefix(devicePrefix) else { return reject(.badPath) }
        let token = request.path.dropFirst(devicePrefix.count)
        if headers.hasDuplicates { return reject(.duplicateHeaders) }

        // 403: authentication. On a connection with a client certificate, `authorization` is
        // ignored, as APNs ignores it with certificate auth.
        let usesTokenAuth = connection.clientCertificateSubject == nil
        if usesTokenAuth {
            if let failure = authenticate(headers.authorization, connection: &connection, limits: tokenLimits) {
                return reject(failure)
            }
        } else if let subject = connection.clientCertificateSubject {
            guard let policy = certificateAuthPolicy else { return reject(.missingProviderToken) }
            if let failure = policy(subject, headers.topic) { return reject(failure) }
        }
        connection.hasAuthenticatedRequest = true

        // 400: the request itself.
        if token.isEmpty { return reject(.missingDeviceToken) }
        guard Self.isValidDeviceToken(token) else { return reject(.badDeviceToken) }
        let pushType: APNsPushType
        if let text = headers.pushType {
            guard let parsed = APNsPushType(rawValue: text) else { return reject(.invalidPushType) }
            pushType = parsed
        } else {
            pushType = .alert
        }
        if let topic = headers.topic {
            guard !topic.isEmpty, topic.hasSuffix(pushType.topicSuffix),
                  topic.utf8.count > pushType.topicSuffix.utf8.count else { return reject(.badTopic) }
        } else if usesTokenAuth {
            return reject(.missingTopic)
        }
        if let priority = headers.priority, priority != "10", priority != "5", priority != "1" {
            return reject(.badPriority)
        }
        // Background pushes: "Always use priority 5. Using priority 10 is an error." Without
        // the header APNs applies 10.
        if pushType == .background && (headers.priority ?? "10") == "10" { return reject(.badPriority) }
        if let expiration = headers.expiration, !Self.isValidExpiration(expiration) { return reject(.badExpirationDate) }
        if let collapseID = headers.collapseID, collapseID.utf8.count > 64 { return reject(.badCollapseId) }
        if let requestedID = headers.apnsID, !Self.isValidUUID(requestedID) { return reject(.badMessageId) }
        if request.bodyLength == 0 { return reject(.payloadEmpty) }
        if request.bodyLength > pushType.maximumPayloadBytes { return reject(.payloadTooLarge) }

        // A token issued to another app than the topic's (the topic less its push type's suffix).
        if let app = tokenApps[token.lowercased()], let topic = headers.topic,
           !topic.utf8.dropLast(pushType.topicSuffix.utf8.count).elementsEqual(app.utf8) {
            return reject(.deviceTokenNotForTopic)
        }

        // 410: the token is no longer active.
        if let unregisteredAt = unregisteredTokens[token.lowercased()] {
            return reject(.unregistered, timestamp: unregisteredAt)
        }

        var answerHeaders: [(name: String, value: String)] = [(name: "apns-id", value: apnsID)]
        if sendsUniqueID { answerHeaders.append((name: "apns-unique-id", value: uuids.next())) }
        return APNsSimulatorAnswer(status: 200, headers: answerHeaders, body: [], reason: nil)
    }

    /// Verifies the provider token (through the cache), its age, the connection's team and how
    /// often the connection switches tokens; nil when accepted.
    private func authenticate(_ authorization: String?, connection: inout APNsConnectionAuthState,
                              limits: TokenLimits) -> APNsReason? {
        let claims: JWTClaims
        do {
            if let authorization, let cached = verifiedTokens.withLock({ $0[authorization] }) {
                try verifier.checkAge(cached)
                claims = cached
            } else {
                claims = try verifier.verify(authorization: authorization)
                if let authorization { remember(authorization, claims) }
            }
        } catch {
            return error.reason
        }
        let now = verifier.clock()
        if let maximumAge = limits.maximumAgeSeconds, claims.age(at: now) > maximumAge { return .expiredProviderToken }
        if let team = connection.boundTeamID, team != claims.teamID { return .invalidProviderToken }
        if authorization != connection.currentAuthorization {
            if let interval = limits.updateMinimumIntervalSeconds, let since = connection.currentAuthorizationSince,
               now - since < interval {
                return .tooManyProviderTokenUpdates
            }
            connection.currentAuthorization = authorization
            connection.currentAuthorizationSince = now
        }
        connection.boundTeamID = claims.teamID
        return nil
    }

    private func remember(_ authorization: String, _ claims: JWTClaims) {
        verifiedTokens.withLock { cache in
            if cache.count >= verifiedTokenCacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[authorization] = claims
        }
    }
}
