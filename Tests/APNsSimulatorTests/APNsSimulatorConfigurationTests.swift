import Testing
@testable import APNsSimulator
import APNs

@Suite struct APNsSimulatorConfigurationTests {
    @Test func defaultsAndRulesFromTrustedKeys() throws {
        let pair = try APNsAuthKeyGenerator.generate()
        let configuration = APNsSimulatorConfiguration(
            certificateFile: "/unused/cert.pem", privateKeyFile: "/unused/key.pem",
            authKeys: [.init(keyID: "ABC123DEFG", teamID: "TEAM123456", publicKeyPEM: pair.publicKeyPEM)])
        #expect(configuration.host == "127.0.0.1" && configuration.port == 0)
        #expect(configuration.maxConcurrentStreams == 1000)

        let clock = TestClock()
        let rules = try configuration.makeRules(clock: clock.function)
        let signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
        let request = APNsSimulatorRequest(
            path: "/3/device/" + sampleToken,
            headers: [(name: "authorization", value: "bearer " + (try signer.sign(issuedAt: clock.now))),
                      (name: "apns-topic", value: sampleTopic)],
            body: [0x7B, 0x7D])
        var connection = APNsConnectionAuthState()
        #expect(rules.answer(request, connection: &connection).status == 200)
    }

    @Test func rejectsAnUntrustworthyKeyEntry() throws {
        let configuration = APNsSimulatorConfiguration(
            certificateFile: "c", privateKeyFile: "k",
            authKeys: [.init(keyID: "K", teamID: "T", publicKeyPEM: "garbage")])
        #expect(throws: APNsKeyError.notAPublicKeyPEM) { try configuration.makeRules() }
    }
}
