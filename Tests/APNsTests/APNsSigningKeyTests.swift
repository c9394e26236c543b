import Testing
@testable import APNs

@Suite struct APNsSigningKeyTests {
    @Test func generatedKeyIsPKCS8AndLoadsFromStringAndFile() throws {
        let pair = try APNsAuthKeyGenerator.generate()
        #expect(pair.privateKeyPKCS8PEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(pair.publicKeyPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let fromString = try APNsSigningKey(pem: pair.privateKeyPKCS8PEM)
        #expect(try fromString.publicKeyPEM() == pair.publicKeyPEM)

        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let path = try scratch.write("AuthKey_ABC123DEFG.p8", pair.privateKeyPKCS8PEM)
        let fromFile = try APNsSigningKey(pemFile: path)
        #expect(try fromFile.publicKeyPEM() == pair.publicKeyPEM)
    }

    @Test func rejectsMissingFilesAndNonKeys() throws {
        #expect(throws: APNsKeyError.fileUnreadable(path: "/nonexistent/AuthKey.p8", reason: "No such file or directory")) {
            try APNsSigningKey(pemFile: "/nonexistent/AuthKey.p8")
        }
        #expect(throws: APNsKeyError.notAPrivateKeyPEM) { try APNsSigningKey(pem: "not a key") }
        let pair = try APNsAuthKeyGenerator.generate()
        #expect(throws: APNsKeyError.notAPrivateKeyPEM) { try APNsSigningKey(pem: pair.publicKeyPEM) }
        #expect(throws: APNsKeyError.notAPublicKeyPEM) { try APNsPublicKey(pem: pair.privateKeyPKCS8PEM) }
    }

    @Test func rejectsOtherKeyTypesWithoutLeakingKeyMaterial() throws {
        let ed25519 = try #require(generateOtherKeyPEM(algorithm: "ED25519"))
        let p384 = try #require(generateOtherKeyPEM(algorithm: "EC", curve: "P-384"))
        #expect(throws: APNsKeyError.unsupportedKeyType("ED25519")) { try APNsSigningKey(pem: ed25519) }
        #expect(throws: APNsKeyError.unsupportedKeyType("EC (secp384r1)")) { try APNsSigningKey(pem: p384) }
        do {
            _ = try APNsSigningKey(pem: p384)
        } catch {
            #expect(error.description.contains("P-256"))
            #expect(!error.description.contains("BEGIN"))
            let body = p384.split(separator: "\n")[1]
            #expect(!error.description.contains(body))
        }
    }
}
