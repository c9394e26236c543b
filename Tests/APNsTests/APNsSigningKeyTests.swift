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

/// A P-256 key is only accepted when its private scalar d is in [1, n-1] and matches the public
/// key stored with it: OpenSSL's PEM decoder takes any 32 bytes as d, and a key outside that
/// range would sign provider tokens that APNs answers with InvalidProviderToken.
@Suite struct APNsSigningKeyValidityTests {
    @Test(arguments: [
        ("0", HandMadeP256Keys.scalar(0)),
        ("n", HandMadeP256Keys.order),
        ("n + 1", HandMadeP256Keys.orderPlusOne),
        ("2^256 - 1", [UInt8](repeating: 0xFF, count: 32)),
    ])
    func aScalarOutsideOneToNMinusOneIsRefused(name: String, scalar: [UInt8]) throws {
        let pem = HandMadeP256Keys.pem(scalar: scalar)
        #expect(throws: APNsKeyError.invalidPrivateKey, "d = \(name)") { try APNsSigningKey(pem: pem) }
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let path = try scratch.write("AuthKey_ABC123DEFG.p8", pem)
        #expect(throws: APNsKeyError.invalidPrivateKey, "d = \(name)") { try APNsSigningKey(pemFile: path) }
        let message = APNsKeyError.invalidPrivateKey.description
        #expect(message.contains("P-256"))
        #expect(!message.contains(pem.split(separator: "\n")[1]))
    }

    @Test func aPublicKeyThatIsNotTheScalarsIsRefused() {
        // d = 2 stored with the public key of d = 1 (G): a damaged scalar the public key gives away.
        let pem = HandMadeP256Keys.pem(scalar: HandMadeP256Keys.scalar(2), publicKey: HandMadeP256Keys.generator)
        #expect(throws: APNsKeyError.invalidPrivateKey) { try APNsSigningKey(pem: pem) }
    }

    @Test func scalarsAtTheEndsOfTheRangeLoadAndSign() throws {
        var orderMinusOne = HandMadeP256Keys.order
        orderMinusOne[31] -= 1
        let keys = [
            HandMadeP256Keys.pem(scalar: HandMadeP256Keys.scalar(1)),
            HandMadeP256Keys.pem(scalar: HandMadeP256Keys.scalar(1), publicKey: HandMadeP256Keys.generator),
            HandMadeP256Keys.pem(scalar: orderMinusOne),
        ]
        for pem in keys {
            let key = try APNsSigningKey(pem: pem)
            let jwt = try JWTSigner(key: key, keyID: "ABC123DEFG", teamID: "TEAM123456").sign(issuedAt: 1_700_000_000)
            #expect(opensslVerifies(jwt: jwt, publicKeyPEM: try key.publicKeyPEM()))
        }
        #expect(try APNsSigningKey(pem: keys[1]).publicKeyPEM() == APNsSigningKey(pem: keys[0]).publicKeyPEM())
    }
}
