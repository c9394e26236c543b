import COpenSSL
import HTTP2

// PEM reads below pass a password callback that supplies no password (`{ _, _, _, _ in 0 }`), so
// OpenSSL never prompts on a terminal and encrypted keys fail to load.

/// An APNs token-auth key: the EC P-256 private key of a `.p8` file (PEM, PKCS#8).
///
/// Thread safety: the key is never modified after loading; OpenSSL 3 allows concurrent signing with
/// one `EVP_PKEY` as long as each operation uses its own `EVP_MD_CTX` (as `JWTSigner` does).
public final class APNsSigningKey: @unchecked Sendable {
    /// The owned `EVP_PKEY*`, freed in `deinit`.
    let pointer: OpaquePointer

    /// Loads a key from a `.p8` file.
    public convenience init(pemFile path: String) throws(APNsKeyError) {
        // A .p8 key is a few hundred bytes.
        if let problem = ReadableFile.problem(at: path, maximumBytes: 1 << 20) {
            throw .fileUnreadable(path: path, reason: problem)
        }
        guard let bio = BIO_new_file(path, "r") else {
            ERR_clear_error()
            throw .fileUnreadable(path: path)
        }
        defer { BIO_free(bio) }
        try self.init(bio: bio)
    }

    /// Loads a key from PEM text (`-----BEGIN PRIVATE KEY-----` …).
    public convenience init(pem: String) throws(APNsKeyError) {
        try self.init(loaded: OpenSSLSupport.withMemoryBIO(pem) { PEM_read_bio_PrivateKey($0, nil, { _, _, _, _ in 0 }, nil) })
    }

    private convenience init(bio: OpaquePointer) throws(APNsKeyError) {
        try self.init(loaded: PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil))
    }

    private init(loaded key: OpaquePointer?) throws(APNsKeyError) {
        let adopted = try OpenSSLSupport.adoptP256(key, missing: .notAPrivateKeyPEM)
        do {
            try OpenSSLSupport.requireValidPrivateKey(adopted)
        } catch {
            EVP_PKEY_free(adopted)
            throw error
        }
        pointer = adopted
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    /// The matching public key as PEM (`-----BEGIN PUBLIC KEY-----`), e.g. for a simulator's key list.
    public func publicKeyPEM() throws(APNsKeyError) -> String {
        guard let pem = OpenSSLSupport.writeToString({ PEM_write_bio_PUBKEY($0, pointer) == 1 }) else {
            ERR_clear_error()
            throw .cryptoFailure("PEM_write_bio_PUBKEY")
        }
        return pem
    }

    /// The matching public key.
    public func publicKey() throws(APNsKeyError) -> APNsPublicKey {
        try APNsPublicKey(pem: publicKeyPEM())
    }
}
