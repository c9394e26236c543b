import COpenSSL

/// Small helpers around OpenSSL memory BIOs and key checks, shared by the key types.
enum OpenSSLSupport {
    /// Runs `body` with a read-only memory BIO over `text`'s UTF-8 bytes.
    static func withMemoryBIO<Result>(_ text: String, _ body: (OpaquePointer) -> Result?) -> Result? {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { buffer -> Result? in
            guard let base = buffer.baseAddress, let bio = BIO_new_mem_buf(base, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }

    /// Creates a writable memory BIO, lets `write` fill it and returns its contents as text.
    static func writeToString(_ write: (OpaquePointer) -> Bool) -> String? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard write(bio) else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let length = apns_bio_get_mem_data(bio, &data)
        guard length > 0, let data else { return nil }
        let bytes = UnsafeRawBufferPointer(start: data, count: Int(length))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Takes ownership of a freshly loaded key: returns it when it is an EC P-256 key, otherwise
    /// frees it and throws (`missing` when loading failed, `unsupportedKeyType` for another kind).
    static func adoptP256(_ key: OpaquePointer?, missing: APNsKeyError) throws(APNsKeyError) -> OpaquePointer {
        guard let key else {
            ERR_clear_error()
            throw missing
        }
        do {
            try requireP256(key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        return key
    }

    /// Checks that a loaded private key is usable: its scalar is in [1, n-1] (`EVP_PKEY_private_check`),
    /// and its public point is valid and is the scalar times the generator (`EVP_PKEY_pairwise_check`,
    /// for a file that stores the public key next to a damaged scalar). A PEM decoder accepts any
    /// 32 bytes as the scalar; such a key would sign tokens that APNs refuses.
    /// - Throws: `invalidPrivateKey`, or `cryptoFailure` when no check context can be made.
    static func requireValidPrivateKey(_ key: OpaquePointer) throws(APNsKeyError) {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            ERR_clear_error()
            throw .cryptoFailure("EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_private_check(context) == 1, EVP_PKEY_pairwise_check(context) == 1 else {
            ERR_clear_error()
            throw .invalidPrivateKey
        }
    }

    /// Checks that `key` is an EC key on P-256; otherwise throws `unsupportedKeyType` naming what it is.
    static func requireP256(_ key: OpaquePointer) throws(APNsKeyError) {
        guard EVP_PKEY_is_a(key, "EC") == 1 else {
            let typeName = EVP_PKEY_get0_type_name(key).map { String(cString: $0) } ?? "unknown"
            throw .unsupportedKeyType(typeName)
        }
        var name = [CChar](repeating: 0, count: 80)
        var nameLength = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &nameLength) == 1 else {
            throw .unsupportedKeyType("EC (unknown curve)")
        }
        let curve = String(decoding: name.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard ["prime256v1", "P-256", "secp256r1"].contains(curve) else {
            throw .unsupportedKeyType("EC (\(curve))")
        }
    }
}
