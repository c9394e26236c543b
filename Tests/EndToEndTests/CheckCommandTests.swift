import APNs
import APNsSimulator
import Foundation
import HTTP2
import Testing
import TestSupport

/// `apns-bridge check` driven as a separate process: credentials of every kind, expiry rules,
/// key file modes, and the effective configuration with secrets redacted.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct CheckCommandTests {
    static let passphrase = "correct horse battery staple"

    /// A token key, a PEM certificate with an encrypted key, a PKCS#12 file and a CA, written into `directory`.
    struct Credentials {
        let directory: ScratchDirectory
        let authority: CertificateAuthority
        let tokenKeyFile: String
        let tokenKeyPEM: String

        init(certificateDays: Int = 365) throws {
            directory = try ScratchDirectory(prefix: "apns-bridge-check")
            authority = try CertificateAuthority()
            try authority.writeCertificate(to: directory.file("ca.pem"))
            let key = try APNsAuthKeyGenerator.generate()
            tokenKeyPEM = key.privateKeyPKCS8PEM
            tokenKeyFile = directory.file("AuthKey_ABC123DEFG.p8")
            try write(tokenKeyPEM, to: tokenKeyFile, mode: 0o600)
            let client = try authority.issueClientCertificate(commonName: "Apple Push Services: com.example.legacy",
                                                              validDays: certificateDays)
            try write(client.certificatePEM, to: directory.file("legacy.pem"), mode: 0o644)
            try write(try client.encryptedPrivateKeyPEM(passphrase: CheckCommandTests.passphrase),
                      to: directory.file("legacy-key.pem"), mode: 0o600)
            try Data(try client.pkcs12(passphrase: CheckCommandTests.passphrase)).write(to: URL(fileURLWithPath: directory.file("legacy.p12")))
            chmod(directory.file("legacy.p12"), 0o600)
        }

        func write(_ text: String, to path: String, mode: mode_t) throws {
            try text.write(toFile: path, atomically: false, encoding: .utf8)
            chmod(path, mode)
        }

        func yaml(passphrase: String = CheckCommandTests.passphrase, caFile: String? = nil) -> String {
            """
            kafka:
              brokers: localhost:9092
              producer: {sasl.password: kafka-secret-value, linger.ms: 5}
            apns: {ca_file: \(caFile ?? directory.file("ca.pem"))}
            apps:
              - {name: chat, bundle_id: com.example.chat, auth: {type: token, key_file: \(tokenKeyFile), key_id: ABC123DEFG, team_id: TEAM123456}}
              - name: legacy
                bundle_id: com.example.legacy
                auth: {type: certificate, cert_file: \(directory.file("legacy.pem")), key_file: \(directory.file("legacy-key.pem")), passphrase: "\(passphrase)"}
              - name: bundled
                bundle_id: com.example.bundled
                auth: {type: certificate, p12_file: \(directory.file("legacy.p12")), passphrase: "\(passphrase)"}
            """
        }
    }

    /// Runs `apns-bridge` with a terminal (`script`), where OpenSSL's own passphrase prompt
    /// would wait for input; a 20 s `timeout` kills it if it does. Returns the status and the
    /// terminal's output.
    func runOnATerminal(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let command = (["timeout", "-s", "KILL", "20", BridgeBinary.url.path] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", command, "/dev/null"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func anEncryptedKeyWithoutAPassphraseIsAnErrorNotAPromptOnTheTerminal() throws {
        let credentials = try Credentials()
        defer { credentials.directory.remove() }
        let config = try TemporaryFile(contents: """
        kafka: {brokers: localhost:9092}
        apps:
          - name: legacy
            bundle_id: com.example.legacy
            auth: {type: certificate, cert_file: \(credentials.directory.file("legacy.pem")), key_file: \(credentials.directory.file("legacy-key.pem"))}
        """)
        let (status, output) = try runOnATerminal(["check", "--config", config.path])
        #expect(status == 2, "\(output)")
        #expect(!output.lowercased().contains("pass phrase"), "\(output)")
        #expect(output.contains("apps.legacy.auth"), "\(output)")
        #expect(output.contains("encrypted without a passphrase given?"), "\(output)")
    }

    /// A certificate file and a CA file whose certificate block is marked encrypted: on a
    /// terminal, where OpenSSL's own password callback would prompt and wait, `check` reports
    /// both at once instead (well within `runOnATerminal`'s 20 s).
    @Test func anEncryptedCertificateIsAnErrorNotAPromptOnTheTerminal() throws {
        let credentials = try Credentials()
        defer { credentials.directory.remove() }
        let certificateFile = credentials.directory.file("legacy-encrypted.pem")
        let caFile = credentials.directory.file("ca-encrypted.pem")
        try credentials.write(EncryptedPEM.marked(try String(contentsOfFile: credentials.directory.file("legacy.pem"), encoding: .utf8)),
                              to: certificateFile, mode: 0o644)
        try credentials.write(EncryptedPEM.marked(credentials.authority.certificatePEM), to: caFile, mode: 0o644)
        let config = try TemporaryFile(contents: """
        kafka: {brokers: localhost:9092}
        apns: {ca_file: \(caFile)}
        apps:
          - name: legacy
            bundle_id: com.example.legacy
            auth: {type: certificate, cert_file: \(certificateFile), key_file: \(credentials.directory.file("legacy-key.pem")), passphrase: "\(Self.passphrase)"}
        """)
        let started = ContinuousClock.now
        let (status, output) = try runOnATerminal(["check", "--config", config.path])
        #expect(ContinuousClock.now - started < .seconds(10), "\(output)")
        #expect(status == 2, "\(output)")
        #expect(!output.lowercased().contains("pass phrase"), "\(output)")
        #expect(output.contains("apns.ca_file: tlsConfiguration: certificate 1 in \(caFile) is encrypted"), "\(output)")
        #expect(output.contains("apps.legacy.auth.cert_file: tlsConfiguration: certificate 1 in \(certificateFile) is encrypted"), "\(output)")
        #expect(output.contains("apps.legacy.auth: tlsConfiguration: cannot load certificate \(certificateFile)"), "\(output)")
    }

    /// A PKCS#12 file as Keychain Access and OpenSSL before 3.0 write it: its certificate
    /// encrypted with RC2-40, an algorithm of OpenSSL 3's legacy provider.
    @Test func aPKCS12FileWithLegacyEncryptionLoads() throws {
        let credentials = try Credentials()
        defer { credentials.directory.remove() }
        let legacyFile = credentials.directory.file("keychain.p12")
        let export = Process()
        export.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        export.arguments = ["pkcs12", "-export", "-legacy", "-in", credentials.directory.file("legacy.pem"),
                            "-inkey", credentials.directory.file("legacy-key.pem"), "-passin", "pass:\(Self.passphrase)",
                            "-out", legacyFile, "-passout", "pass:\(Self.passphrase)"]
        try export.run()
        export.waitUntilExit()
        try #require(export.terminationStatus == 0)
        let config = try TemporaryFile(contents: credentials.yaml().replacingOccurrences(
            of: credentials.directory.file("legacy.p12"), with: legacyFile))
        let (status, output, errorOutput) = try BridgeBinary.run(["check", "--config", config.path])
        #expect(status == 0, "\(output)\(errorOutput)")
        #expect(output.contains("apps.bundled.auth.p12_file: certificate CN=Apple Push Services: com.example.legacy valid until"))
    }

    @Test func everyKindOfCredentialIsLoadedAndTheEffectiveConfigurationHasNoSecrets() throws {
        let credentials = try Credentials()
        defer { credentials.directory.remove() }
        let config = try TemporaryFile(contents: credentials.yaml())
        let (status, output, errorOutput) = try BridgeBinary.run(["check", "--config", config.path])
        #expect(status == 0, "\(output)\(errorOutput)")
        #expect(output.contains("apns.ca_file: \(credentials.directory.file("ca.pem")) holds 1 certificate(s)"))
        #expect(output.contains("apps.chat.auth: key \(credentials.tokenKeyFile) loads and signs an ES256 provider token"))
        #expect(output.contains("apps.legacy.auth.cert_file: certificate CN=Apple Push Services: com.example.legacy valid until"))
        #expect(output.contains("apps.legacy.auth: certificate and key"))
        #expect(output.contains("apps.bundled.auth.p12_file: certificate CN=Apple Push Services: com.example.legacy valid until"))
        #expect(output.contains("apps.bundled.auth: PKCS#12 identity"))
        #expect(output.contains("effective configuration (secrets redacted):"))
        #expect(output.contains("max_in_flight: 20000"))  // defaults are filled in
        #expect(output.contains(#"passphrase: "<redacted>""#))
        #expect(output.contains(#"sasl.password: "<redacted>""#))
        #expect(output.hasSuffix("configuration OK\n"))
        let everything = output + errorOutput
        #expect(!everything.contains(Self.passphrase))
        #expect(!everything.contains("kafka-secret-value"))
        #expect(!everything.contains(SecretScan.pemBody(credentials.tokenKeyPEM)))
        #expect(!everything.contains("eyJ"))
    }

    @Test func aKeyFileReadableByOthersIsAWarning() throws {
        let credentials = try Credentials()
        defer { credentials.directory.remove() }
        chmod(credentials.tokenKeyFile, 0o644)
        let config = try TemporaryFile(contents: credentials.yaml())
        let (status, output, _) = try BridgeBinary.run(["check", "--config", config.path, "--quiet"])
        #expect(status == 0)
        #expect(output.contains("warning apps.chat.auth.key_file: \(credentials.tokenKeyFile) is accessible by group or others (mode 644)"))
        #expect(output.hasSuffix("configuration OK (1 warning(s))\n"))
    }

    @Test func aCertificateExpiringWithinThirtyDaysIsAWarningAndAnExpiredOneAnError() throws {
        let soon = try Credentials(certificateDays: 10)
        defer { soon.directory.remove() }
        let soonConfig = try TemporaryFile(contents: soon.yaml())
        let (soonStatus, soonOutput, _) = try BridgeBinary.run(["check", "--config", soonConfig.path])
        #expect(soonStatus == 0)
        #expect(soonOutput.contains("warning apps.legacy.auth.cert_file: certificate CN=Apple Push Services: com.example.legacy expires in "))
        #expect(soonOutput.contains("warning apps.bundled.auth.p12_file:"))

        let expired = try Credentials(certificateDays: 0)
        defer { expired.directory.remove() }
        let expiredConfig = try TemporaryFile(contents: expired.yaml())
        let (status, output, errorOutput) = try BridgeBinary.run(["check", "--config", expiredConfig.path])
        #expect(status == 2)
        #expect(output.contains("error   apps.legacy.auth.cert_file: certificate CN=Apple Push Services: com.example.legacy expired on"))
        #expect(errorOutput.contains("apps.bundled.auth.p12_file: certificate"))
        #expect(!output.contains("configuration OK"))
    }

    @Test func aWrongPassphraseAndAnUnreadableCAFileAreErrorsThatNameTheKey() throws {
        let credentials = try Credentials()
        defer { credentials.directory.remove() }
        let notACertificate = credentials.directory.file("not-a-ca.pem")
        try credentials.write("hello\n", to: notACertificate, mode: 0o644)
        let config = try TemporaryFile(contents: credentials.yaml(passphrase: "wrong passphrase", caFile: notACertificate))
        let (status, output, errorOutput) = try BridgeBinary.run(["check", "--config", config.path])
        #expect(status == 2)
        #expect(errorOutput.contains("apns.ca_file: tlsConfiguration: no PEM certificate in \(notACertificate)"))
        #expect(errorOutput.contains("apps.legacy.auth: tlsConfiguration: cannot read private key \(credentials.directory.file("legacy-key.pem")) (wrong passphrase?)"))
        #expect(errorOutput.contains("apps.bundled.auth.p12_file: tlsConfiguration: cannot decrypt PKCS#12 file"))
        #expect(!(output + errorOutput).contains("wrong passphrase\""))
    }

    /// An environment variable whose bytes are not UTF-8 is refused by name where a `${…}` uses
    /// it, never expanded with its bytes replaced (a passphrase would silently change); in a
    /// passphrase only the key is named.
    @Test func anEnvironmentVariableThatIsNotUTF8IsRefusedWhereItIsUsed() throws {
        let credentials = try Credentials()
        defer { credentials.directory.remove() }
        let config = try TemporaryFile(contents: credentials.yaml(passphrase: "${PASS}", caFile: #""${CA_DIR}/ca.pem""#))
        let script = #"CA_DIR="$(printf "$2"'\344')" PASS="$(printf 'p\344sswort')" exec "$0" check --config "$1""#
        let refused = try BridgeBinary.runThroughShell(script, [BridgeBinary.url.path, config.path, credentials.directory.path])
        #expect(refused.status == 2, "\(refused.error)")
        #expect(refused.error.contains("apns.ca_file: environment variable CA_DIR is not valid UTF-8"), "\(refused.error)")
        // The CA's reference is correct UTF-8 once the variable is: the passphrase is named next.
        let second = try BridgeBinary.runThroughShell(#"CA_DIR="$2" PASS="$(printf 'p\344sswort')" exec "$0" check --config "$1""#,
                                                      [BridgeBinary.url.path, config.path, credentials.directory.path])
        #expect(second.status == 2, "\(second.error)")
        #expect(second.error.contains("a ${…} reference in a secret value names an environment variable that is not valid UTF-8"), "\(second.error)")
        #expect(!second.error.contains("PASS") && !second.error.contains("sswort"), "\(second.error)")
    }

    /// config/demo.yaml against the credentials `apns-bridge simulator --credentials` generates.
    @Test func theShippedDemoConfigurationChecksAgainstTheSimulatorsCredentials() throws {
        let scratch = try ScratchDirectory(prefix: "apns-bridge-demo")
        defer { scratch.remove() }
        let simulator = try CapturedProcess(BridgeBinary.url, ["simulator", "--listen", "127.0.0.1:0", "--credentials", scratch.path])
        #expect(waitFor(timeout: .seconds(20)) { simulator.output.contains("APNs simulator listening") })
        // Tests/EndToEndTests/<file> → package root
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let check = try CapturedProcess(BridgeBinary.url, ["check", "--config", root.path + "/config/demo.yaml"],
                                        environment: ["APNS_BRIDGE_DEMO_DIR": scratch.path])
        let status = BridgeBinary.wait(check.process, seconds: 20)
        #expect(status == 0, "\(check.output)\(check.errorOutput)")
        #expect(check.output.contains("apps.demo.auth: key \(scratch.path)/AuthKey_ABC123DEFG.p8 loads and signs"))
        #expect(check.output.hasSuffix("configuration OK\n"))
        _ = simulator.stop()
    }
}

/// Looking for secrets in output.
enum SecretScan {
    /// The base64 body of a PEM block (without the BEGIN/END lines), joined: what must never be printed.
    static func pemBody(_ pem: String) -> String {
        pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }

    /// Every line of the PEM body: no part of it may be printed either.
    static func pemLines(_ pem: String) -> [String] {
        pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
    }
}
