import COpenSSL

// The PEM read passes a password callback that supplies none, so OpenSSL never prompts on a terminal.

/// The EC P-256 public half of an APNs auth key, used to verify provider JWTs (the simulator's side).
///
/// Thread safety: never modified after loading; concurrent verification is safe with separate contexts.
public final class APNsPublicKey: @unchecked Sendable {
    /// The owned `EVP_PKEY*`, freed in `deinit`.
    let pointer: OpaquePointer

    /// Loads a public key from PEM text (`-----BEGIN PUBLIC KEY-----` …).
    public init(pem: String) throws(APNsKeyError) {
        let loaded = OpenSSLSupport.withMemoryBIO(pem) { PEM_read_bio_PUBKEY($0, nil, { _, _, _, _ in 0 }, nil) }
        pointer = try OpenSSLSupport.adoptP256(loaded, missing: .notAPublicKeyPEM)
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    /// Verifies a DER-encoded ECDSA signature over SHA-256 of `message`.
    public func verify(derSignature: [UInt8], message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = EVP_DigestVerify(context, derSignature, derSignature.count, message, message.count)
        if result != 1 { ERR_clear_error() }
        return result == 1
    }
}
