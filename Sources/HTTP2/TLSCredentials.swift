#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// Loading certificates and private keys into an `SSL_CTX`, shared by the client and server
/// contexts. Cold path (context creation only).
package enum TLSCredentials {
    /// A new `SSL_CTX` of `method` with the settings both ends share: TLS 1.2 at least, partial
    /// writes from a buffer that may move between retries (the connection's output), read-ahead,
    /// no renegotiation (RFC 9113 §9.2.1) and no passphrase prompt on the terminal.
    /// - Throws: ``HTTP2Error`` (`.tlsConfiguration`) when OpenSSL cannot make the context.
    static func newContext(_ method: OpaquePointer?) throws -> OpaquePointer {
        guard let context = SSL_CTX_new(method) else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "SSL_CTX_new failed")
        }
        refusePassphrasePrompts(context)
        _ = apns_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION)
        _ = apns_ssl_ctx_set_mode(context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        _ = apns_ssl_ctx_set_read_ahead(context, 1)
        apns_ssl_ctx_disable_renegotiation(context)
        return context
    }

    /// Makes ``tlsRefusingPassphraseCallback`` `context`'s default password callback. OpenSSL's
    /// loaders that take no callback of their own (`SSL_CTX_use_certificate_chain_file`) use it,
    /// and without one they would ask for a passphrase on the terminal and wait there; with it an
    /// encrypted PEM block fails to load. Private keys are read with a callback of their own
    /// (``usePEM(context:certificateFile:privateKeyFile:passphrase:)``), which is how a
    /// configured passphrase is supplied.
    private static func refusePassphrasePrompts(_ context: OpaquePointer) {
        SSL_CTX_set_default_passwd_cb(context, tlsRefusingPassphraseCallback)
        SSL_CTX_set_default_passwd_cb_userdata(context, nil)
    }

    /// Reads the certificates of a PEM file in file order and runs `body` with each (freed
    /// afterwards); returns how many there were. An encrypted certificate block (`Proc-Type:
    /// 4,ENCRYPTED`) is an error, never a passphrase prompt on the terminal.
    /// - Throws: ``HTTP2Error`` (`.tlsConfiguration`) when the file cannot be read or holds an
    ///   encrypted certificate, or what `body` throws.
    package static func forEachPEMCertificate(file: String, what: String, _ body: (OpaquePointer) throws -> Void) throws -> Int {
        try checkReadable(file, what: what)
        guard let bio = BIO_new_file(file, "r") else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot open \(file)")
        }
        defer { BIO_free(bio) }
        var count = 0
        var encrypted = false
        while let certificate = PEM_read_bio_X509(bio, nil, tlsRefusingPassphraseCallback, &encrypted) {
            defer { X509_free(certificate) }
            count += 1
            try body(certificate)
        }
        ERR_clear_error()  // the read that ends the loop leaves "no start line" (or the refused passphrase) behind
        if encrypted {
            throw HTTP2Error(.tlsConfiguration, "certificate \(count + 1) in \(file) is encrypted (Proc-Type: 4,ENCRYPTED): "
                                 + "certificates are read without a passphrase")
        }
        return count
    }

    /// The subject names of the certificates of a PEM file, for `SSL_CTX_set_client_CA_list`:
    /// what `SSL_load_client_CA_file` returns, but read with
    /// ``forEachPEMCertificate(file:what:_:)`` (`SSL_load_client_CA_file` takes no password
    /// callback and would ask on the terminal for an encrypted block). The caller owns the
    /// returned `STACK_OF(X509_NAME)`.
    /// - Throws: ``HTTP2Error`` (`.tlsConfiguration`) naming the file.
    static func clientCANames(file: String) throws -> OpaquePointer {
        guard let names = OPENSSL_sk_new_null() else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "OPENSSL_sk_new_null failed")
        }
        do {
            let count = try forEachPEMCertificate(file: file, what: "client CA file") { certificate in
                guard let name = X509_NAME_dup(X509_get_subject_name(certificate)) else {
                    throw HTTP2Error.openSSL(.tlsConfiguration, "X509_NAME_dup failed")
                }
                guard OPENSSL_sk_push(names, UnsafeRawPointer(name)) > 0 else {
                    X509_NAME_free(name)
                    throw HTTP2Error.openSSL(.tlsConfiguration, "OPENSSL_sk_push failed")
                }
            }
            guard count > 0 else { throw HTTP2Error(.tlsConfiguration, "no PEM certificate in client CA file \(file)") }
        } catch {
            OPENSSL_sk_pop_free(names, { X509_NAME_free(OpaquePointer($0)) })
            throw error
        }
        return names
    }

    /// Loads a PEM certificate chain file and a PEM private key file (optionally encrypted with
    /// `passphrase`, supplied through a password callback) and checks that they match.
    static func usePEM(context: OpaquePointer, certificateFile: String, privateKeyFile: String,
                       passphrase: String?) throws {
        try checkReadable(certificateFile, what: "certificate")
        try checkReadable(privateKeyFile, what: "private key")
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot load certificate \(certificateFile)")
        }
        guard let bio = BIO_new_file(privateKeyFile, "r") else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot open private key \(privateKeyFile)")
        }
        defer { BIO_free(bio) }
        // The callback even without a passphrase (it then refuses): with none, OpenSSL would ask
        // for one on the terminal and wait there.
        let key = withPassphrase(passphrase) { userData in
            PEM_read_bio_PrivateKey(bio, nil, tlsPassphraseCallback, userData)
        }
        guard let key else {
            let hint = passphrase == nil ? "encrypted without a passphrase given?" : "wrong passphrase?"
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot read private key \(privateKeyFile) (\(hint))")
        }
        defer { EVP_PKEY_free(key) }
        try useKey(context: context, key: key)
    }

    /// Throws unless `file` is a regular file OpenSSL can read without blocking (``ReadableFile``).
    package static func checkReadable(_ file: String, what: String) throws {
        if let problem = ReadableFile.problem(at: file) {
            throw HTTP2Error(.tlsConfiguration, "cannot read \(what) \(file): \(problem)")
        }
    }

    /// Loads a PKCS#12 file (certificate, private key and optional chain) protected by `passphrase`.
    static func usePKCS12(context: OpaquePointer, file: String, passphrase: String?) throws {
        try withPKCS12(file: file, passphrase: passphrase) { key, certificate, chain in
            guard let key else {
                throw HTTP2Error.openSSL(.tlsConfiguration, "cannot decrypt PKCS#12 file \(file) (wrong passphrase?)")
            }
            guard SSL_CTX_use_certificate(context, certificate) == 1 else {
                throw HTTP2Error.openSSL(.tlsConfiguration, "cannot use PKCS#12 certificate")
            }
            if let chain {
                for index in 0..<OPENSSL_sk_num(chain) {
                    let extra = OpaquePointer(OPENSSL_sk_value(chain, index))
                    guard apns_ssl_ctx_add1_chain_cert(context, extra) == 1 else {
                        throw HTTP2Error.openSSL(.tlsConfiguration, "cannot use PKCS#12 chain certificate")
                    }
                }
            }
            try useKey(context: context, key: key)
        }
    }

    /// Opens, parses and decrypts a PKCS#12 file and runs `body` with its key (if any), its
    /// certificate and its chain (if any); frees all three afterwards.
    /// - Throws: ``HTTP2Error`` (`.tlsConfiguration`) naming the file, never the passphrase.
    package static func withPKCS12<Result>(
        file: String,
        passphrase: String?,
        _ body: (_ key: OpaquePointer?, _ certificate: OpaquePointer, _ chain: OpaquePointer?) throws -> Result
    ) throws -> Result {
        try checkReadable(file, what: "PKCS#12 file")
        guard let bio = BIO_new_file(file, "rb") else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot open PKCS#12 file \(file)")
        }
        defer { BIO_free(bio) }
        guard let p12 = d2i_PKCS12_bio(bio, nil) else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot parse PKCS#12 file \(file)")
        }
        defer { PKCS12_free(p12) }
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var chain: OpaquePointer?
        let parsed = parsePKCS12(p12, passphrase: passphrase, key: &key, certificate: &certificate, chain: &chain)
        defer {
            if let key { EVP_PKEY_free(key) }
            if let certificate { X509_free(certificate) }
            if let chain { OPENSSL_sk_pop_free(chain, { X509_free(OpaquePointer($0)) }) }
        }
        guard parsed, let certificate else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot decrypt PKCS#12 file \(file) (wrong passphrase?)")
        }
        return try body(key, certificate, chain)
    }

    private static func useKey(context: OpaquePointer, key: OpaquePointer) throws {
        guard SSL_CTX_use_PrivateKey(context, key) == 1 else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot use private key")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "private key does not match the certificate")
        }
    }

    /// `PKCS12_parse` with the passphrase in wiped memory (``withPassphraseBytes(_:_:)``); no
    /// passphrase is the empty one. The caller frees what it returns.
    ///
    /// Files exported by Keychain Access (and by OpenSSL before 3.0) encrypt the certificate with
    /// RC2-40 or 3DES, which OpenSSL 3 keeps in its legacy provider: when a parse fails, the
    /// legacy provider is loaded (once per process, with the default one) and the parse retried.
    package static func parsePKCS12(_ p12: OpaquePointer, passphrase: String?, key: inout OpaquePointer?,
                                    certificate: inout OpaquePointer?, chain: inout OpaquePointer?) -> Bool {
        if parsePKCS12Once(p12, passphrase: passphrase, key: &key, certificate: &certificate, chain: &chain) { return true }
        guard legacyProviderLoaded else { return false }
        ERR_clear_error()
        return parsePKCS12Once(p12, passphrase: passphrase, key: &key, certificate: &certificate, chain: &chain)
    }

    /// Whether OpenSSL's legacy provider could be loaded (``LoadedProviders``).
    private static var legacyProviderLoaded: Bool { LoadedProviders.shared.legacy != nil }

    /// OpenSSL's legacy provider, loaded on first use next to the default one (loading any
    /// provider explicitly stops the default from loading on its own). The handles are kept for
    /// the life of the process: the providers stay loaded, and stay reachable (a leak checker
    /// would otherwise report them at exit).
    private struct LoadedProviders: @unchecked Sendable {  // immutable after the one-time initialisation
        let `default`: OpaquePointer?
        let legacy: OpaquePointer?
        static let shared = LoadedProviders(default: OSSL_PROVIDER_load(nil, "default"), legacy: OSSL_PROVIDER_load(nil, "legacy"))
    }

    private static func parsePKCS12Once(_ p12: OpaquePointer, passphrase: String?, key: inout OpaquePointer?,
                                        certificate: inout OpaquePointer?, chain: inout OpaquePointer?) -> Bool {
        withPassphraseBytes(passphrase) { bytes -> Bool in
            // The bytes are NUL-terminated (see withPassphraseBytes).
            guard let text = bytes?.baseAddress else { return PKCS12_parse(p12, "", &key, &certificate, &chain) == 1 }
            return PKCS12_parse(p12, UnsafeRawPointer(text).assumingMemoryBound(to: CChar.self), &key, &certificate, &chain) == 1
        }
    }

    /// Runs `body` with the user data that ``tlsPassphraseCallback`` expects (nil without a passphrase).
    package static func withPassphrase<Result>(_ passphrase: String?, _ body: (UnsafeMutableRawPointer?) -> Result) -> Result {
        withPassphraseBytes(passphrase) { bytes in
            guard var bytes else { return body(nil) }
            return withUnsafeMutablePointer(to: &bytes) { pointer in body(UnsafeMutableRawPointer(pointer)) }
        }
    }

    /// Runs `body` with the passphrase's UTF-8 bytes in memory of their own (followed by a NUL
    /// that the buffer does not count), then wipes that memory with `explicit_bzero` (a store
    /// the optimizer may not remove) before freeing it. OpenSSL cleanses its own copies. The
    /// `String` itself cannot be wiped: see docs/SECURITY.md.
    package static func withPassphraseBytes<Result>(_ passphrase: String?,
                                                    _ body: (UnsafeMutableBufferPointer<UInt8>?) -> Result) -> Result {
        guard let passphrase else { return body(nil) }
        let count = passphrase.utf8.count
        let storage = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: count + 1)
        storage.initialize(repeating: 0)
        defer {
            wipe(UnsafeMutableRawBufferPointer(storage))
            storage.deallocate()
        }
        _ = UnsafeMutableBufferPointer(rebasing: storage[..<count]).initialize(from: passphrase.utf8)
        return body(UnsafeMutableBufferPointer(rebasing: storage[..<count]))
    }

    /// Overwrites `memory` with zeros in a way the optimizer keeps.
    package static func wipe(_ memory: UnsafeMutableRawBufferPointer) {
        guard let base = memory.baseAddress, memory.count > 0 else { return }
        explicit_bzero(base, memory.count)
    }
}

/// OpenSSL's password callback where no passphrase is given: supplies none (-1, which OpenSSL
/// reports as a failed password read), so an encrypted PEM block fails to load instead of
/// OpenSSL asking on the terminal. A non-nil `userData` points at a `Bool` set to true: the
/// reader learns that the block was encrypted.
package func tlsRefusingPassphraseCallback(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ writing: Int32,
                                           _ userData: UnsafeMutableRawPointer?) -> Int32 {
    userData?.assumingMemoryBound(to: Bool.self).pointee = true
    return -1
}

/// OpenSSL's password callback: copies the passphrase that `userData` points at (an
/// `UnsafeMutableBufferPointer<UInt8>`, see ``TLSCredentials/withPassphrase(_:_:)``) into `buffer`.
package func tlsPassphraseCallback(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ writing: Int32,
                           _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let buffer, let userData else { return -1 }
    let passphrase = userData.assumingMemoryBound(to: UnsafeMutableBufferPointer<UInt8>.self).pointee
    let count = min(Int(size), passphrase.count)
    for index in 0..<count { buffer[index] = CChar(bitPattern: passphrase[index]) }
    return Int32(count)
}
