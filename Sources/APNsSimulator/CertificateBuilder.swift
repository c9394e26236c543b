#if canImport(Glibc)
import Glibc
#endif
import HTTP2
import COpenSSL

/// OpenSSL plumbing for ``CertificateAuthority``: keys, X.509 building and PEM/DER encoding.
enum CertificateBuilder {
    /// A new EC P-256 key (caller frees with `EVP_PKEY_free`).
    static func generateKey() throws -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw HTTP2Error.openSSL(.certificateGeneration, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_generate(context, &key) == 1, let key else {
            throw HTTP2Error.openSSL(.certificateGeneration, "EC P-256 key generation failed")
        }
        return key
    }

    /// A signed X.509 v3 certificate (caller frees with `X509_free`). `issuer` nil = self-signed.
    static func build(commonName: String, publicKey: OpaquePointer, issuer: OpaquePointer?, signingKey: OpaquePointer,
                      validDays: Int, extensions: [(Int32, String)]) throws -> OpaquePointer {
        guard let certificate = X509_new() else { throw HTTP2Error.openSSL(.certificateGeneration, "X509_new failed") }
        do {
            try fill(certificate, commonName: commonName, publicKey: publicKey, issuer: issuer, validDays: validDays)
            var context = X509V3_CTX()
            X509V3_set_ctx(&context, issuer ?? certificate, certificate, nil, nil, 0)
            for (nid, value) in extensions {
                guard let extensionObject = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                    throw HTTP2Error.openSSL(.certificateGeneration, "bad extension \(value)")
                }
                defer { X509_EXTENSION_free(extensionObject) }
                guard X509_add_ext(certificate, extensionObject, -1) == 1 else {
                    throw HTTP2Error.openSSL(.certificateGeneration, "X509_add_ext failed")
                }
            }
            guard X509_sign(certificate, signingKey, EVP_sha256()) > 0 else {
                throw HTTP2Error.openSSL(.certificateGeneration, "X509_sign failed")
            }
            return certificate
        } catch {
            X509_free(certificate)
            throw error
        }
    }

    private static func fill(_ certificate: OpaquePointer, commonName: String, publicKey: OpaquePointer,
                             issuer: OpaquePointer?, validDays: Int) throws {
        var serialBytes = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&serialBytes, Int32(serialBytes.count)) == 1 else {
            throw HTTP2Error.openSSL(.certificateGeneration, "RAND_bytes failed")
        }
        serialBytes[0] &= 0x7f  // positive
        guard let serial = BN_bin2bn(serialBytes, Int32(serialBytes.count), nil) else {
            throw HTTP2Error.openSSL(.certificateGeneration, "BN_bin2bn failed")
        }
        defer { BN_free(serial) }
        guard let name = X509_NAME_new() else { throw HTTP2Error.openSSL(.certificateGeneration, "X509_NAME_new failed") }
        defer { X509_NAME_free(name) }
        let commonNameBytes = Array(commonName.utf8)
        guard X509_set_version(certificate, 2) == 1,
              BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(certificate)) != nil,
              X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), validDays * 86_400) != nil,
              X509_set_pubkey(certificate, publicKey) == 1,
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonNameBytes, Int32(commonNameBytes.count), -1, 0) == 1,
              X509_set_subject_name(certificate, name) == 1,
              X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0) } ?? name) == 1 else {
            throw HTTP2Error.openSSL(.certificateGeneration, "cannot fill the certificate")
        }
    }

    /// Parses a PEM private key (caller frees).
    static func readKey(_ pem: String) throws -> OpaquePointer {
        try withMemoryBIO(pem) { bio in
            // A callback that gives no passphrase: never OpenSSL's prompt on the terminal.
            guard let key = PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil) else {
                throw HTTP2Error.openSSL(.certificateGeneration, "cannot parse private key")
            }
            return key
        }
    }

    /// Parses a PEM certificate (caller frees).
    static func readCertificate(_ pem: String) throws -> OpaquePointer {
        try withMemoryBIO(pem) { bio in
            guard let certificate = PEM_read_bio_X509(bio, nil, tlsRefusingPassphraseCallback, nil) else {
                throw HTTP2Error.openSSL(.certificateGeneration, "cannot parse certificate")
            }
            return certificate
        }
    }

    /// Runs `write` on a memory BIO and returns what it wrote as text.
    static func pem(_ write: (OpaquePointer) -> Int32) throws -> String {
        String(decoding: try bytes(write), as: UTF8.self)
    }

    /// Runs `write` on a memory BIO and returns what it wrote.
    static func bytes(_ write: (OpaquePointer) -> Int32) throws -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { throw HTTP2Error.openSSL(.certificateGeneration, "BIO_new failed") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw HTTP2Error.openSSL(.certificateGeneration, "encoding failed") }
        var data: UnsafeMutablePointer<CChar>?
        let count = apns_bio_get_mem_data(bio, &data)
        guard let data, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: data, count: Int(count)))
    }

    private static func withMemoryBIO<Result>(_ text: String, _ body: (OpaquePointer) throws -> Result) throws -> Result {
        var bytes = Array(text.utf8)
        return try bytes.withUnsafeMutableBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else {
                throw HTTP2Error.openSSL(.certificateGeneration, "BIO_new_mem_buf failed")
            }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }
}

/// Paths of the PEM files written by ``CertificateAuthority/writeFiles(to:serverHosts:clientCommonName:)``.
public struct CertificateFiles: Sendable {
    /// `ca.pem`: the CA certificate to trust.
    public var caCertificatePath: String
    /// `server.pem` and `server-key.pem`.
    public var serverCertificatePath: String, serverPrivateKeyPath: String
    /// `client.pem` and `client-key.pem`, when a client certificate was requested.
    public var clientCertificatePath: String?, clientPrivateKeyPath: String?

    init(directory: String, withClient: Bool) {
        caCertificatePath = directory + "/ca.pem"
        serverCertificatePath = directory + "/server.pem"
        serverPrivateKeyPath = directory + "/server-key.pem"
        clientCertificatePath = withClient ? directory + "/client.pem" : nil
        clientPrivateKeyPath = withClient ? directory + "/client-key.pem" : nil
    }

    /// Creates `directory` (mode 0700) if it is missing, and refuses one that is not a real
    /// directory of this user's, writable by nobody else: files written into a directory that
    /// another user controls could be read or replaced by them.
    static func prepareDirectory(_ directory: String) throws {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST { throw HTTP2Error.system("mkdir(\(directory))") }
        var status = stat()
        guard lstat(directory, &status) == 0 else { throw HTTP2Error.system("lstat(\(directory))") }
        guard status.st_mode & S_IFMT == S_IFDIR, status.st_uid == geteuid(), status.st_mode & 0o022 == 0 else {
            throw HTTP2Error(.certificateGeneration,
                             "\(directory) must be a directory (not a link) of this user's that no one else can write to")
        }
    }

    /// Writes `text` to `path` with permissions `mode` (replacing the file).
    static func write(_ text: String, to path: String, mode: mode_t) throws {
        try write(Array(text.utf8), to: path, mode: mode)
    }

    /// Writes `bytes` to `path` with permissions `mode` (replacing the file). A symbolic link
    /// at `path` is refused, not followed, and a file that cannot be given `mode` (another
    /// user's) is refused before anything is written into it.
    static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw HTTP2Error.system("open(\(path))") }
        defer { close(fd) }
        guard fchmod(fd, mode) == 0 else { throw HTTP2Error.system("fchmod(\(path))") }
        guard ftruncate(fd, 0) == 0 else { throw HTTP2Error.system("ftruncate(\(path))") }
        var offset = 0
        while offset < bytes.count {
            // invariant: offset < bytes.count, so the buffer is non-empty.
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw HTTP2Error.system("write(\(path))")
            }
            offset += written
        }
    }
}
