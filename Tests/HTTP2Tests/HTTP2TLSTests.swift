#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import HTTP2
import APNsSimulator
import COpenSSL
import Synchronization
import Testing
import Observability

@Suite struct HTTP2TLSTests {
    @Test(.timeLimit(.minutes(1)))
    func unknownCertificateAuthorityFailsVerification() async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext())
        defer { server.stop() }
        // System roots only: the generated CA is unknown.
        let client = try TestClient(port: server.port, tls: try TLSClientContext(TLSClientConfiguration()))
        defer { client.loop.shutdown() }
        #expect(try await client.connect() == false)
        let reason = try #require(client.delegate.closeReason)
        #expect(reason.contains("certificate verification failed"))
        #expect(client.delegate.record.withLock { $0.readyCount } == 0)
        client.loop.shutdown()
    }

    @Test(.timeLimit(.minutes(1)))
    func wrongIPAddressFailsVerification() async throws {
        let credentials = try TestCredentials(serverHosts: ["localhost"])  // no IP SAN
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext())
        defer { server.stop() }
        let client = try TestClient(host: "127.0.0.1", port: server.port,
                                    tls: try TLSClientContext(credentials.clientConfiguration))
        defer { client.loop.shutdown() }
        #expect(try await client.connect() == false)
        let reason = try #require(client.delegate.closeReason)
        #expect(reason.contains("certificate verification failed"))
        #expect(reason.contains("IP address mismatch"))
        client.loop.shutdown()
    }

    @Test(.timeLimit(.minutes(1)))
    func wrongHostNameFailsVerification() async throws {
        let credentials = try TestCredentials(serverHosts: ["push.example.com", "127.0.0.1"])
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext())
        defer { server.stop() }
        let client = try TestClient(host: "localhost", port: server.port,
                                    tls: try TLSClientContext(credentials.clientConfiguration))
        defer { client.loop.shutdown() }
        #expect(try await client.connect() == false)
        let reason = try #require(client.delegate.closeReason)
        #expect(reason.contains("certificate verification failed"))
        #expect(reason.contains("hostname mismatch"))
        client.loop.shutdown()
    }

    @Test(.timeLimit(.minutes(1)))
    func serverWithoutALPNIsRejected() async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let peer = try RawTLSServer(credentials: credentials, offerALPN: false, payload: [])
        let client = try TestClient(port: peer.port, tls: try TLSClientContext(credentials.clientConfiguration))
        defer { client.loop.shutdown() }
        #expect(try await client.connect() == false)
        #expect(client.delegate.closeReason?.contains("ALPN did not negotiate h2") == true)
        client.loop.shutdown()
        try await peer.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func hostileServerSendingGarbageClosesTheConnectionCleanly() async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        // A valid empty SETTINGS frame (so the client becomes ready), then garbage.
        var payload: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]
        payload += (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
        let peer = try RawTLSServer(credentials: credentials, offerALPN: true, payload: payload)
        let client = try TestClient(port: peer.port, tls: try TLSClientContext(credentials.clientConfiguration))
        defer { client.loop.shutdown() }
        client.delegate.onReady = { connection in
            _ = connection.submit(testRequest(tag: 1), tag: 1)
            connection.flush()
        }
        client.connection.start()
        #expect(await eventually { client.delegate.closeReason != nil })
        #expect(client.delegate.closeReason?.contains("HTTP/2 protocol error") == true, "\(client.delegate.closeReason ?? "")")
        if client.delegate.isReady {
            // The request either never left (refused: HEADERS were still queued when the
            // session failed) or was in flight (connection lost). Never an answer.
            switch client.delegate.failure(1) {
            case .refused?, .connectionLost?: break
            case let other: Issue.record("unexpected stream result \(String(describing: other))")
            }
        }
        client.loop.shutdown()
        try await peer.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func hostileClientSendingGarbageIsDisconnectedAndTheServerKeepsServing() async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext())
        defer { server.stop() }
        let garbage = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8) + [UInt8](repeating: 0xff, count: 1024)
        #expect(try rawTLSClientSendsGarbage(port: server.port, credentials: credentials, payload: garbage))

        let client = try TestClient(port: server.port, tls: try TLSClientContext(credentials.clientConfiguration))
        defer { client.loop.shutdown() }
        #expect(try await client.connect())
        #expect(await client.submit(testRequest(tag: 7), tag: 7))
        #expect(await eventually { client.delegate.result(7) != nil })
        guard case .success(let response)? = client.delegate.result(7) else {
            Issue.record("request after the hostile client failed")
            return
        }
        #expect(response.status == 200)
        try await client.stop()
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["pem", "pkcs12"])
    func requiredClientCertificateIsAccepted(format: String) async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext(requireClientCertificates: true))
        defer { server.stop() }
        let issued = try credentials.authority.issueClientCertificate(commonName: "provider")
        var configuration = credentials.clientConfiguration
        configuration.privateKeyPassphrase = "correct horse"
        if format == "pem" {
            let keyPath = credentials.directory + "/provider-key.pem"
            try Data(issued.encryptedPrivateKeyPEM(passphrase: "correct horse").utf8).write(to: URL(fileURLWithPath: keyPath))
            let certificatePath = credentials.directory + "/provider.pem"
            try Data(issued.certificatePEM.utf8).write(to: URL(fileURLWithPath: certificatePath))
            configuration.certificateFile = certificatePath
            configuration.privateKeyFile = keyPath
        } else {
            let path = credentials.directory + "/provider.p12"
            try Data(issued.pkcs12(passphrase: "correct horse")).write(to: URL(fileURLWithPath: path))
            configuration.pkcs12File = path
        }
        let client = try TestClient(port: server.port, tls: try TLSClientContext(configuration))
        defer { client.loop.shutdown() }
        #expect(try await client.connect())
        #expect(await client.submit(testRequest(tag: 3), tag: 3))
        #expect(await eventually { client.delegate.result(3) != nil })
        guard case .success(let response)? = client.delegate.result(3) else {
            Issue.record("request with client certificate failed: \(String(describing: client.delegate.result(3)))")
            return
        }
        #expect(response.status == 200)
        try await client.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func missingClientCertificateIsRejected() async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext(requireClientCertificates: true))
        defer { server.stop() }
        let client = try TestClient(port: server.port, tls: try TLSClientContext(credentials.clientConfiguration))
        defer { client.loop.shutdown() }
        #expect(try await client.connect() == false)
        #expect(client.delegate.closeReason != nil)
        client.loop.shutdown()
    }

    @Test func wrongPassphraseIsAConfigurationError() throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let issued = try credentials.authority.issueClientCertificate(commonName: "provider")
        let keyPath = credentials.directory + "/locked-key.pem"
        try Data(issued.encryptedPrivateKeyPEM(passphrase: "right").utf8).write(to: URL(fileURLWithPath: keyPath))
        let certificatePath = credentials.directory + "/locked.pem"
        try Data(issued.certificatePEM.utf8).write(to: URL(fileURLWithPath: certificatePath))
        let configuration = TLSClientConfiguration(certificateFile: certificatePath, privateKeyFile: keyPath,
                                                   privateKeyPassphrase: "wrong")
        #expect(throws: HTTP2Error.self) { try TLSClientContext(configuration) }
    }
}

extension HTTP2TLSTests {
    /// RFC 9113 §9.2.1: no renegotiation under HTTP/2. Both contexts refuse it, so a peer's
    /// HelloRequest gets an alert, never a second handshake on a live connection.
    @Test func bothContextsRefuseRenegotiation() throws {
        let certificates = try TestCredentials()
        defer { certificates.remove() }
        let client = try TLSClientContext(certificates.clientConfiguration)
        let server = try certificates.serverContext()
        #expect(apns_ssl_ctx_renegotiation_disabled(client.context) == 1)
        #expect(apns_ssl_ctx_renegotiation_disabled(server.context) == 1)
    }

    /// The same on a live connection: a TLS 1.2 server's HelloRequest, once the client is
    /// ready, is refused with an alert (the server then ends the connection), never answered
    /// with a second handshake.
    @Test(.timeLimit(.minutes(1)))
    func theClientRefusesAServersRenegotiationOnALiveConnection() async throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let emptySettings: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]
        let peer = try RawTLSServer(credentials: credentials, offerALPN: true, payload: emptySettings,
                                    requestRenegotiation: true)
        let client = try TestClient(port: peer.port, tls: try TLSClientContext(credentials.clientConfiguration))
        defer { client.loop.shutdown() }
        client.connection.start()
        #expect(await eventually { peer.renegotiation != nil })
        #expect(peer.renegotiation == .refused)
        #expect(await eventually { client.delegate.closeReason != nil })
        client.loop.shutdown()
        try await peer.stop()
    }

    /// And the server's side: a TLS 1.2 client asking for a renegotiation on a connection to
    /// the server (the simulator's transport) gets an alert, not a second handshake. (OpenSSL 3
    /// servers refuse client renegotiation by default too; the context's option keeps it so
    /// whatever the library's default.)
    @Test(.timeLimit(.minutes(1)))
    func theServerRefusesAClientsRenegotiation() throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        let server = try TestServer(tls: try credentials.serverContext())
        defer { server.stop() }
        let outcome = try rawTLSClientAsksForRenegotiation(port: server.port, credentials: credentials)
        #expect(outcome == .refused)
    }
}
