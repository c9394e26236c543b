import COpenSSL

/// Generates new APNs-style auth keys (EC P-256) for tests, the demo and the simulator.
public enum APNsAuthKeyGenerator {
    /// A generated key pair as PEM text.
    public struct KeyPair: Sendable {
        /// The private key as an unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`), like Apple's `.p8` files.
        public var privateKeyPKCS8PEM: String
        /// The public key as PEM (`BEGIN PUBLIC KEY`).
        public var publicKeyPEM: String
    }

    /// Generates a fresh P-256 key pair.
    public static func generate() throws(APNsKeyError) -> KeyPair {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw .cryptoFailure("EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
              EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_generate(context, &key) == 1, let key else {
            ERR_clear_error()
            throw .cryptoFailure("EVP_PKEY_generate")
        }
        defer { EVP_PKEY_free(key) }
        guard let privatePEM = OpenSSLSupport.writeToString({
            PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) == 1
        }), let publicPEM = OpenSSLSupport.writeToString({ PEM_write_bio_PUBKEY($0, key) == 1 }) else {
            ERR_clear_error()
            throw .cryptoFailure("PEM_write_bio")
        }
        return KeyPair(privateKeyPKCS8PEM: privatePEM, publicKeyPEM: publicPEM)
    }
}
