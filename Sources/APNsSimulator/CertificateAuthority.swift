#if canImport(Glibc)
import Glibc
#endif
import HTTP2
import COpenSSL
import Synchronization
import Observability

/// A throw-away certificate authority for tests, demos and the APNs simulator ("generated test
/// credentials"): an EC P-256 self-signed CA that issues server certificates (SANs for names and
/// IP addresses) and client certificates, all made with the OpenSSL API.
///
/// Thread ownership: immutable after `init`; issuing is serialized by a mutex, so it is safe from
/// any thread.
public final class CertificateAuthority: @unchecked Sendable {
    /// The CA certificate, PEM.
    public let certificatePEM: String
    /// The CA private key, PEM (PKCS#8, unencrypted).
    public let privateKeyPEM: String
    private let key: OpaquePointer
    private let certificate: OpaquePointer
    private let lock = Locked(())

    /// Generates a new CA key and self-signed CA certificate.
    /// - Throws: ``HTTP2Error`` with code `.certificateGeneration`.
    public init(commonName: String = "apns-bridge test CA", validDays: Int = 3650) throws {
        let key = try CertificateBuilder.generateKey()
        do {
            let certificate = try CertificateBuilder.build(
                commonName: commonName, publicKey: key, issuer: nil, signingKey: key, validDays: validDays,
                extensions: [
                    (NID_basic_constraints, "critical,CA:TRUE"),
                    (NID_key_usage, "critical,keyCertSign,cRLSign"),
                    (NID_subject_key_identifier, "hash"),
                ])
            self.key = key
            self.certificate = certificate
            self.certificatePEM = try CertificateBuilder.pem { PEM_write_bio_X509($0, certificate) }
            self.privateKeyPEM = try CertificateBuilder.pem { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }

    /// Issues a server certificate valid for `hosts` (DNS names and IP literals become SANs; the
    /// first host is also the common name).
    public func issueServerCertificate(hosts: [String] = ["localhost", "127.0.0.1"], validDays: Int = 825) throws -> IssuedCertificate {
        let names = hosts.map { SocketAddress.isIPLiteral($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        return try issue(commonName: hosts.first ?? "localhost", validDays: validDays, extensions: [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature"),
            (NID_ext_key_usage, "serverAuth"),
            (NID_subject_alt_name, names),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid"),
        ])
    }

    /// Issues a client certificate (extended key usage clientAuth) for `commonName`.
    public func issueClientCertificate(commonName: String, validDays: Int = 825) throws -> IssuedCertificate {
        try issue(commonName: commonName, validDays: validDays, extensions: [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature"),
            (NID_ext_key_usage, "clientAuth"),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid"),
        ])
    }

    /// Writes the CA certificate (PEM) to `path`.
    public func writeCertificate(to path: String) throws {
        try CertificateFiles.write(certificatePEM, to: path, mode: 0o644)
    }

    /// Creates `directory` if needed (see ``CertificateFiles/prepareDirectory(_:)``) and writes `ca.pem`, `server.pem` / `server-key.pem` (for
    /// `serverHosts`) and, when `clientCommonName` is given, `client.pem` / `client-key.pem`.
    public func writeFiles(to directory: String, serverHosts: [String] = ["localhost", "127.0.0.1"],
                           clientCommonName: String? = nil) throws -> CertificateFiles {
        try CertificateFiles.prepareDirectory(directory)
        let files = CertificateFiles(directory: directory, withClient: clientCommonName != nil)
        try writeCertificate(to: files.caCertificatePath)
        try issueServerCertificate(hosts: serverHosts)
            .write(certificatePath: files.serverCertificatePath, privateKeyPath: files.serverPrivateKeyPath)
        if let clientCommonName, let certificatePath = files.clientCertificatePath, let keyPath = files.clientPrivateKeyPath {
            try issueClientCertificate(commonName: clientCommonName)
                .write(certificatePath: certificatePath, privateKeyPath: keyPath)
        }
        return files
    }

    private func issue(commonName: String, validDays: Int, extensions: [(Int32, String)]) throws -> IssuedCertificate {
        try lock.withLock { _ in
            let leafKey = try CertificateBuilder.generateKey()
            defer { EVP_PKEY_free(leafKey) }
            let leaf = try CertificateBuilder.build(commonName: commonName, publicKey: leafKey, issuer: certificate,
                                                    signingKey: key, validDays: validDays, extensions: extensions)
            defer { X509_free(leaf) }
            return IssuedCertificate(
                certificatePEM: try CertificateBuilder.pem { PEM_write_bio_X509($0, leaf) },
                privateKeyPEM: try CertificateBuilder.pem { PEM_write_bio_PrivateKey($0, leafKey, nil, nil, 0, nil, nil) })
        }
    }
}

/// A certificate and its private key, both PEM, issued by a ``CertificateAuthority``.
public struct IssuedCertificate: Sendable {
    /// The certificate, PEM.
    public var certificatePEM: String
    /// The private key, PEM (PKCS#8, unencrypted).
    public var privateKeyPEM: String

    /// Writes the certificate (mode 0644) and the key (mode 0600).
    public func write(certificatePath: String, privateKeyPath: String) throws {
        try CertificateFiles.write(certificatePEM, to: certificatePath, mode: 0o644)
        try CertificateFiles.write(privateKeyPEM, to: privateKeyPath, mode: 0o600)
    }

    /// The private key as encrypted PKCS#8 PEM (AES-256-CBC) under `passphrase`.
    public func encryptedPrivateKeyPEM(passphrase: String) throws -> String {
        let key = try CertificateBuilder.readKey(privateKeyPEM)
        defer { EVP_PKEY_free(key) }
        return try CertificateBuilder.pem { bio in
            TLSCredentials.withPassphrase(passphrase) { userData in
                PEM_write_bio_PKCS8PrivateKey(bio, key, EVP_aes_256_cbc(), nil, 0, tlsPassphraseCallback, userData)
            }
        }
    }

    /// The certificate and key as a PKCS#12 file (DER bytes) protected by `passphrase`.
    public func pkcs12(passphrase: String) throws -> [UInt8] {
        let key = try CertificateBuilder.readKey(privateKeyPEM)
        defer { EVP_PKEY_free(key) }
        let certificate = try CertificateBuilder.readCertificate(certificatePEM)
        defer { X509_free(certificate) }
        guard let p12 = PKCS12_create(passphrase, "apns-bridge", key, certificate, nil, 0, 0, 0, 0, 0) else {
            throw HTTP2Error.openSSL(.certificateGeneration, "PKCS12_create failed")
        }
        defer { PKCS12_free(p12) }
        return try CertificateBuilder.bytes { i2d_PKCS12_bio($0, p12) }
    }
}
