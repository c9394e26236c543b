import APNsSimulator
import COpenSSL
import Foundation
@testable import HTTP2
import Testing
import TestSupport

/// Certificate files with an encrypted block (`Proc-Type: 4,ENCRYPTED`) are refused with an
/// error naming the block, and every TLS context has a password callback of its own, so no
/// load falls back to OpenSSL's default callback, which prompts on the terminal and waits.
/// Without a terminal that default fails too, so these tests check what the loaders report and
/// how the contexts are set up; CheckCommandTests runs `check` on a terminal to prove that
/// nothing prompts.
@Suite struct EncryptedCertificateTests {
    @Test func anEncryptedCertificateBlockIsNamedNotSkipped() throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let encrypted = credentials.directory + "/encrypted.pem"
        try EncryptedPEM.marked(credentials.authority.certificatePEM).write(toFile: encrypted, atomically: false, encoding: .utf8)
        let error = try #require(throws: HTTP2Error.self) { try CertificateInspector.pemCertificates(file: encrypted) }
        #expect(error.message == "certificate 1 in \(encrypted) is encrypted (Proc-Type: 4,ENCRYPTED): certificates are read without a passphrase")

        // After a readable certificate: an error too, not the end of the file.
        let mixed = credentials.directory + "/mixed.pem"
        let issued = try credentials.authority.issueClientCertificate(commonName: "second")
        try (credentials.authority.certificatePEM + EncryptedPEM.marked(issued.certificatePEM))
            .write(toFile: mixed, atomically: false, encoding: .utf8)
        let second = try #require(throws: HTTP2Error.self) { try CertificateInspector.pemCertificates(file: mixed) }
        #expect(second.message.hasPrefix("certificate 2 in \(mixed) is encrypted"))
        #expect(try CertificateInspector.pemCertificates(file: credentials.files.caCertificatePath).count == 1)
    }

    @Test func everyContextRefusesPassphrasesItWasNotGiven() throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let client = try TLSClientContext(credentials.clientConfiguration)
        let server = try credentials.serverContext()
        #expect(SSL_CTX_get_default_passwd_cb(client.context) != nil)
        #expect(SSL_CTX_get_default_passwd_cb(server.context) != nil)

        let encrypted = credentials.directory + "/encrypted.pem"
        let issued = try credentials.authority.issueClientCertificate(commonName: "client")
        try EncryptedPEM.marked(issued.certificatePEM).write(toFile: encrypted, atomically: false, encoding: .utf8)
        let key = credentials.directory + "/client-key.pem"
        try issued.privateKeyPEM.write(toFile: key, atomically: false, encoding: .utf8)
        let clientError = try #require(throws: HTTP2Error.self) {
            try TLSClientContext(TLSClientConfiguration(certificateFile: encrypted, privateKeyFile: key))
        }
        #expect(clientError.message.hasPrefix("cannot load certificate \(encrypted)"))
        #expect(clientError.message.contains("bad password read"), "\(clientError)")
        let serverError = try #require(throws: HTTP2Error.self) {
            try TLSServerContext(certificateFile: encrypted, privateKeyFile: key)
        }
        #expect(serverError.message.contains("bad password read"), "\(serverError)")
    }

    @Test func theClientCAFileIsReadWithoutAPrompt() throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let encrypted = credentials.directory + "/encrypted-ca.pem"
        try EncryptedPEM.marked(credentials.authority.certificatePEM).write(toFile: encrypted, atomically: false, encoding: .utf8)
        let error = try #require(throws: HTTP2Error.self) {
            try TLSServerContext(certificateFile: credentials.files.serverCertificatePath,
                                 privateKeyFile: credentials.files.serverPrivateKeyPath, clientCAFile: encrypted)
        }
        #expect(error.message.hasPrefix("certificate 1 in \(encrypted) is encrypted"), "\(error)")

        // A readable file: its certificates' subjects are the names the server asks for.
        let server = try credentials.serverContext(requireClientCertificates: true)
        let names = try #require(SSL_CTX_get_client_CA_list(server.context))
        #expect(OPENSSL_sk_num(names) == 1)
        let name = try #require(OpaquePointer(OPENSSL_sk_value(names, 0)))
        var buffer = [CChar](repeating: 0, count: 256)
        let line = String(cString: X509_NAME_oneline(name, &buffer, Int32(buffer.count)))
        #expect(line == "/CN=HTTP2Tests CA")
    }
}
