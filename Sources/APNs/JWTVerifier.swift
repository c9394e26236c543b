import JSON
import COpenSSL
import Observability

/// The claims of a verified APNs provider token.
public struct JWTClaims: Sendable, Equatable {
    /// `kid`: the key that signed the token.
    public var keyID: String
    /// `iss`: the team id.
    public var teamID: String
    /// `iat`: Unix seconds.
    public var issuedAt: Int64

    /// Seconds from `iat` until `now` (negative when issued in the future), clamped to Int64's
    /// range: a signed `iat` may be any Int64, and the plain difference would trap.
    public func age(at now: Int64) -> Int64 {
        Self.clampedDifference(now, issuedAt)
    }

    /// Seconds from `now` until `iat` (negative when issued in the past), clamped likewise.
    public func secondsAhead(of now: Int64) -> Int64 {
        Self.clampedDifference(issuedAt, now)
    }

    /// `minuend - subtrahend`, or the Int64 bound on the side of the true result when it does not fit.
    private static func clampedDifference(_ minuend: Int64, _ subtrahend: Int64) -> Int64 {
        let (difference, overflow) = minuend.subtractingReportingOverflow(subtrahend)
        guard overflow else { return difference }
        return minuend < subtrahend ? .min : .max
    }
}

/// Why a provider token was refused; `reason` is what APNs answers (always status 403).
public enum JWTVerificationError: Error, Sendable, Equatable {
    /// No `authorization: bearer …` header.
    case missingToken
    /// Malformed, wrong algorithm, unknown key id, team mismatch or bad signature; the value says which.
    case invalidToken(String)
    /// Validly signed, but issued more than the verifier's maximum age ago.
    case expired(issuedAt: Int64)

    /// The APNs reason for this failure.
    public var reason: APNsReason {
        switch self {
        case .missingToken: .missingProviderToken
        case .invalidToken: .invalidProviderToken
        case .expired: .expiredProviderToken
        }
    }
}

/// Verifies ES256 provider tokens the way APNs does (the simulator's side of `JWTSigner`).
public struct JWTVerifier: Sendable {
    /// A public key the verifier trusts, and the team it belongs to.
    public struct TrustedKey: Sendable {
        public var publicKey: APNsPublicKey
        public var teamID: String

        /// Creates a trusted key entry.
        public init(publicKey: APNsPublicKey, teamID: String) {
            self.publicKey = publicKey
            self.teamID = teamID
        }
    }

    /// Trusted keys by key id (`kid`).
    public let keys: [String: TrustedKey]
    /// Tokens issued more than this many seconds ago are expired (APNs: one hour).
    public let maximumAgeSeconds: Int64
    /// Tokens issued more than this many seconds in the future are invalid (clock skew allowance).
    public let maximumFutureSeconds: Int64
    /// The current Unix time in seconds.
    public let clock: @Sendable () -> Int64

    /// Creates a verifier over `keys` with an injectable clock.
    public init(
        keys: [String: TrustedKey],
        maximumAgeSeconds: Int64 = 3600,
        maximumFutureSeconds: Int64 = 300,
        clock: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() / 1000 }
    ) {
        self.keys = keys
        self.maximumAgeSeconds = maximumAgeSeconds
        self.maximumFutureSeconds = maximumFutureSeconds
        self.clock = clock
    }

    /// Verifies the value of an `authorization` header (`bearer <jwt>`, scheme case-insensitive).
    public func verify(authorization: String?) throws(JWTVerificationError) -> JWTClaims {
        guard let authorization, !authorization.isEmpty else { throw .missingToken }
        let prefix = "bearer "
        guard authorization.utf8.count > prefix.utf8.count,
              authorization.prefix(prefix.count).lowercased() == prefix else {
            throw .invalidToken("authorization is not a bearer token")
        }
        return try verify(String(authorization.dropFirst(prefix.count)))
    }

    /// Verifies a JWT: structure, `alg` ES256, known `kid`, `iss` of that key's team, signature, then age.
    public func verify(_ token: String) throws(JWTVerificationError) -> JWTClaims {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .invalidToken("not three dot-separated parts") }
        guard let headerBytes = Base64URL.decode(bytes: Array(parts[0])),
              let header = JSONScanner.parseObjectWithUniqueMembers(headerBytes) else {
            throw .invalidToken("header is not base64url JSON")
        }
        guard header["alg"]?.stringValue == "ES256" else { throw .invalidToken("alg is not ES256") }
        guard let keyID = header["kid"]?.stringValue else { throw .invalidToken("no kid") }
        guard let trusted = keys[keyID] else { throw .invalidToken("unknown kid") }

        guard let claimBytes = Base64URL.decode(bytes: Array(parts[1])),
              let claims = JSONScanner.parseObjectWithUniqueMembers(claimBytes) else {
            throw .invalidToken("claims are not base64url JSON")
        }
        guard let teamID = claims["iss"]?.stringValue else { throw .invalidToken("no iss") }
        guard teamID == trusted.teamID else { throw .invalidToken("iss does not match the key's team") }
        guard let issuedAt = claims["iat"]?.int64Value else { throw .invalidToken("iat is not an integer") }

        guard let rawSignature = Base64URL.decode(bytes: Array(parts[2])),
              rawSignature.count == ECDSASignatureFormat.scalarLength * 2 else {
            throw .invalidToken("signature is not 64 bytes of base64url")
        }
        guard let der = Self.derSignatureViaOpenSSL(rawSignature) else {
            throw .invalidToken("signature is not a valid r and s")
        }
        // The signing input is the first two parts exactly as sent.
        let signingInputLength = parts[0].count + 1 + parts[1].count
        let signingInput = Array(token.utf8.prefix(signingInputLength))
        guard trusted.publicKey.verify(derSignature: der, message: signingInput) else {
            throw .invalidToken("bad signature")
        }

        let verified = JWTClaims(keyID: keyID, teamID: teamID, issuedAt: issuedAt)
        try checkAge(verified)
        return verified
    }

    /// Checks only the age of already verified claims against the clock (for cached verifications).
    public func checkAge(_ claims: JWTClaims) throws(JWTVerificationError) {
        let now = clock()
        if claims.age(at: now) > maximumAgeSeconds { throw .expired(issuedAt: claims.issuedAt) }
        if claims.secondsAhead(of: now) > maximumFutureSeconds { throw .invalidToken("iat is in the future") }
    }

    /// `r ‖ s` → DER through OpenSSL's own encoder (`ECDSA_SIG_set0` + `i2d_ECDSA_SIG`).
    static func derSignatureViaOpenSSL(_ raw: [UInt8]) -> [UInt8]? {
        let half = ECDSASignatureFormat.scalarLength
        guard raw.count == half * 2, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32(half), nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress.map { $0 + half }, Int32(half), nil) }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {   // on success the signature owns r and s
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }
}
