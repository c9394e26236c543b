#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// What `apns-bridge check` needs to know about a certificate: whom it names and when it is valid.
public struct CertificateSummary: Sendable, Equatable {
    /// The subject, one line (e.g. `CN=Apple Push Services: com.example.chat, O=…`).
    public var subject: String
    /// Start of validity, Unix seconds.
    public var notBefore: Int64
    /// End of validity, Unix seconds.
    public var notAfter: Int64

    /// Creates a summary.
    public init(subject: String, notBefore: Int64, notAfter: Int64) {
        self.subject = subject
        self.notBefore = notBefore
        self.notAfter = notAfter
    }
}

/// Reads certificates from PEM and PKCS#12 files without using them (cold path, for `check`).
public enum CertificateInspector {
    /// Every certificate in a PEM file, in file order.
    /// - Throws: ``HTTP2Error`` (`.tlsConfiguration`) when the file cannot be read, holds no
    ///   certificate or an encrypted one (never a passphrase prompt on the terminal).
    public static func pemCertificates(file: String) throws -> [CertificateSummary] {
        var summaries: [CertificateSummary] = []
        _ = try TLSCredentials.forEachPEMCertificate(file: file, what: "certificate file") { certificate in
            summaries.append(try summary(of: certificate))
        }
        guard !summaries.isEmpty else {
            throw HTTP2Error(.tlsConfiguration, "no PEM certificate in \(file)")
        }
        return summaries
    }

    /// The certificate of a PKCS#12 file, decrypted with `passphrase`.
    /// - Throws: ``HTTP2Error`` (`.tlsConfiguration`) naming the file, never the passphrase.
    public static func pkcs12Certificate(file: String, passphrase: String?) throws -> CertificateSummary {
        try TLSCredentials.withPKCS12(file: file, passphrase: passphrase) { _, certificate, _ in
            try summary(of: certificate)
        }
    }

    private static func summary(of certificate: OpaquePointer) throws -> CertificateSummary {
        guard let notBefore = unixSeconds(X509_get0_notBefore(certificate)),
              let notAfter = unixSeconds(X509_get0_notAfter(certificate)) else {
            throw HTTP2Error(.tlsConfiguration, "certificate has an unreadable validity period")
        }
        return CertificateSummary(subject: subjectLine(of: certificate), notBefore: notBefore, notAfter: notAfter)
    }

    private static func unixSeconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    private static func subjectLine(of certificate: OpaquePointer) -> String {
        guard let name = X509_get_subject_name(certificate), let bio = BIO_new(BIO_s_mem()) else { return "?" }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, 0) >= 0 else { return "?" }
        var data: UnsafeMutablePointer<CChar>?
        let count = apns_bio_get_mem_data(bio, &data)
        guard let data, count > 0 else { return "?" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: Int(count)), as: UTF8.self)
    }
}
