import COpenSSL
import Observability

/// Signs APNs provider tokens: ES256 JWTs `{"alg":"ES256","kid":KEYID}.{"iss":TEAMID,"iat":SECONDS}`.
///
/// The signature is ECDSA P-256 over SHA-256 (`EVP_DigestSign`), converted from OpenSSL's DER into
/// the 64-byte `r ‖ s` form that JWS requires. Thread-safe: each call uses its own `EVP_MD_CTX`.
public struct JWTSigner: Sendable {
    /// The private key.
    public let key: APNsSigningKey
    /// The 10-character key id (`kid`) from Apple's developer portal.
    public let keyID: String
    /// The 10-character team id (`iss`).
    public let teamID: String

    /// Creates a signer for one key and team.
    public init(key: APNsSigningKey, keyID: String, teamID: String) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Returns a signed JWT issued at `issuedAt` (Unix seconds).
    public func sign(issuedAt: Int64) throws(APNsKeyError) -> String {
        var header: [UInt8] = Array(#"{"alg":"ES256","kid":"#.utf8)
        JSONText.appendQuoted(keyID, to: &header)
        header.append(UInt8(ascii: "}"))
        var claims: [UInt8] = Array(#"{"iss":"#.utf8)
        JSONText.appendQuoted(teamID, to: &claims)
        claims.append(contentsOf: Array(#","iat":"#.utf8))
        claims.append(contentsOf: Array(String(issuedAt).utf8))
        claims.append(UInt8(ascii: "}"))

        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let der = try derSignature(of: Array(signingInput.utf8))
        guard let raw = ECDSASignatureFormat.rawSignature(fromDER: der) else {
            throw .cryptoFailure("ECDSA signature was not a P-256 DER signature")
        }
        return signingInput + "." + Base64URL.encode(raw)
    }

    /// ECDSA-SHA256 signature of `message`, DER-encoded as OpenSSL returns it.
    private func derSignature(of message: [UInt8]) throws(APNsKeyError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw .cryptoFailure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else {
            ERR_clear_error()
            throw .cryptoFailure("EVP_DigestSignInit")
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else {
            ERR_clear_error()
            throw .cryptoFailure("EVP_DigestSign")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
            ERR_clear_error()
            throw .cryptoFailure("EVP_DigestSign")
        }
        signature.removeSubrange(length...)
        return signature
    }
}
