#if canImport(Glibc)
import Glibc
#endif
import APNs
import HTTP2
import Observability

extension ConfigurationCheck {
    static func checkApp(_ app: AppSettings, now: Int64) -> [ConfigurationFinding] {
        let subject = "apps.\(app.name).auth"
        var findings: [ConfigurationFinding] = []
        switch app.auth {
        case .token(let keyFile, let keyID, let teamID):
            findings += checkKeyFileMode(keyFile, subject: subject + ".key_file")
            do {
                let signer = JWTSigner(key: try APNsSigningKey(pemFile: keyFile), keyID: keyID, teamID: teamID)
                _ = try signer.sign(issuedAt: now)
                findings.append(.init(.ok, subject, "key \(keyFile) loads and signs an ES256 provider token (key id \(keyID), team \(teamID))"))
            } catch {
                findings.append(.init(.error, subject, "\(error)"))
            }
        case .certificate(let certFile, let keyFile, _):
            findings += checkKeyFileMode(keyFile, subject: subject + ".key_file")
            do {
                let leaf = try CertificateInspector.pemCertificates(file: certFile)[0]  // invariant: never empty
                findings.append(validity(of: leaf, subject: subject + ".cert_file", now: now))
            } catch {
                findings.append(.init(.error, subject + ".cert_file", "\(error)"))
            }
            findings.append(loadTLSIdentity(app, subject: subject, what: "certificate and key \(keyFile)"))
        case .certificatePKCS12(let p12File, let passphrase):
            findings += checkKeyFileMode(p12File, subject: subject + ".p12_file")
            do {
                let leaf = try CertificateInspector.pkcs12Certificate(file: p12File, passphrase: passphrase)
                findings.append(validity(of: leaf, subject: subject + ".p12_file", now: now))
                findings.append(loadTLSIdentity(app, subject: subject, what: "PKCS#12 identity \(p12File)"))
            } catch {
                findings.append(.init(.error, subject + ".p12_file", "\(error)"))  // loading it would fail the same way
            }
        }
        return findings
    }

    /// Warnings for certificates that expire within 30 days and errors for those not valid now,
    /// of every app with certificate auth; `run` logs them at start (it needs the passphrases,
    /// so before they are dropped). A certificate that cannot be read is left to the loading of
    /// the credentials, which reports it.
    public static func certificateValidityFindings(_ configuration: BridgeConfiguration, now: Int64) -> [ConfigurationFinding] {
        configuration.apps.compactMap { app -> ConfigurationFinding? in
            let subject = "apps.\(app.name).auth"
            let leaf: (CertificateSummary, String)?
            switch app.auth {
            case .token:
                leaf = nil
            case .certificate(let certFile, _, _):
                leaf = (try? CertificateInspector.pemCertificates(file: certFile))?.first.map { ($0, subject + ".cert_file") }
            case .certificatePKCS12(let p12File, let passphrase):
                leaf = (try? CertificateInspector.pkcs12Certificate(file: p12File, passphrase: passphrase)).map { ($0, subject + ".p12_file") }
            }
            guard let (certificate, key) = leaf else { return nil }
            let finding = validity(of: certificate, subject: key, now: now)
            return finding.severity == .ok ? nil : finding
        }
    }

    /// The certificate and key as the connections will load them (passphrase, key matches certificate).
    private static func loadTLSIdentity(_ app: AppSettings, subject: String, what: String) -> ConfigurationFinding {
        do {
            _ = try AppCredentials(app: app, caFile: nil)
            return .init(.ok, subject, "\(what) load and match")
        } catch {
            return .init(.error, subject, error.message)
        }
    }

    static func checkCAFile(_ caFile: String, now: Int64) -> [ConfigurationFinding] {
        do {
            let certificates = try CertificateInspector.pemCertificates(file: caFile)
            var findings = [ConfigurationFinding(.ok, "apns.ca_file", "\(caFile) holds \(certificates.count) certificate(s)")]
            findings += certificates.map { validity(of: $0, subject: "apns.ca_file", now: now) }.filter { $0.severity != .ok }
            return findings
        } catch {
            return [.init(.error, "apns.ca_file", "\(error)")]
        }
    }

    /// Valid now and for at least `expiryWarningSeconds`, a warning when it expires sooner, an error otherwise.
    static func validity(of certificate: CertificateSummary, subject: String, now: Int64) -> ConfigurationFinding {
        let until = Timestamp.iso8601(certificate.notAfter * 1000)
        if now < certificate.notBefore {
            return .init(.error, subject, "certificate \(certificate.subject) is not valid before \(Timestamp.iso8601(certificate.notBefore * 1000))")
        }
        if now >= certificate.notAfter {
            return .init(.error, subject, "certificate \(certificate.subject) expired on \(until)")
        }
        let days = (certificate.notAfter - now) / 86_400
        if certificate.notAfter - now < expiryWarningSeconds {
            return .init(.warning, subject, "certificate \(certificate.subject) expires in \(days) day(s), on \(until): renew it")
        }
        return .init(.ok, subject, "certificate \(certificate.subject) valid until \(until) (\(days) days)")
    }

    /// Warnings for every app's key file (`.p8`, PEM key or PKCS#12) that group or others can
    /// read; `run` logs them at start, `check` reports them with its other findings.
    public static func keyFileModeWarnings(_ configuration: BridgeConfiguration) -> [ConfigurationFinding] {
        configuration.apps.flatMap { app -> [ConfigurationFinding] in
            let subject = "apps.\(app.name).auth"
            switch app.auth {
            case .token(let keyFile, _, _), .certificate(_, let keyFile, _):
                return checkKeyFileMode(keyFile, subject: subject + ".key_file")
            case .certificatePKCS12(let p12File, _):
                return checkKeyFileMode(p12File, subject: subject + ".p12_file")
            }
        }
    }

    /// A warning when a key file can be read (or written) by group or others.
    static func checkKeyFileMode(_ path: String, subject: String) -> [ConfigurationFinding] {
        var status = stat()
        // Missing, unreadable or not a file at all: reported by the load, not as a mode.
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return [] }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 != 0 else { return [] }
        return [.init(.warning, subject, "\(path) is accessible by group or others (mode \(String(mode, radix: 8))); chmod 600 it")]
    }
}
