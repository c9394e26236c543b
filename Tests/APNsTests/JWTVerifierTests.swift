import Testing
@testable import APNs

@Suite struct JWTVerifierTests {
    struct Fixture {
        let signer: JWTSigner
        let verifier: JWTVerifier
        let clock = TestClock()

        init() throws {
            let pair = try APNsAuthKeyGenerator.generate()
            signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
            let trusted = JWTVerifier.TrustedKey(publicKey: try APNsPublicKey(pem: pair.publicKeyPEM), teamID: "TEAM123456")
            verifier = JWTVerifier(keys: ["ABC123DEFG": trusted], clock: clock.function)
        }
    }

    @Test func acceptsAValidTokenAndReturnsItsClaims() throws {
        let fixture = try Fixture()
        let jwt = try fixture.signer.sign(issuedAt: fixture.clock.now)
        let claims = try fixture.verifier.verify(authorization: "bearer " + jwt)
        #expect(claims == JWTClaims(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAt: fixture.clock.now))
    }

    @Test func mapsFailuresToAPNsReasons() throws {
        let fixture = try Fixture()
        let jwt = try fixture.signer.sign(issuedAt: fixture.clock.now)
        #expect(throws: JWTVerificationError.missingToken) { try fixture.verifier.verify(authorization: nil) }
        #expect(JWTVerificationError.missingToken.reason == .missingProviderToken)

        let invalid: [String] = [
            "bearer", "basic abc", "bearer a.b", "bearer " + jwt + "x", "bearer " + jwt.dropLast(2),
        ]
        for header in invalid {
            do {
                _ = try fixture.verifier.verify(authorization: header)
                Issue.record("accepted \(header.prefix(12))")
            } catch {
                #expect(error.reason == .invalidProviderToken)
            }
        }
    }

    @Test func rejectsUnknownKeyWrongTeamWrongAlgorithmAndForeignSignature() throws {
        let fixture = try Fixture()
        let now = fixture.clock.now
        let unknownKey = JWTSigner(key: fixture.signer.key, keyID: "OTHERKEY00", teamID: "TEAM123456")
        let wrongTeam = JWTSigner(key: fixture.signer.key, keyID: "ABC123DEFG", teamID: "OTHERTEAM0")
        let otherPair = try APNsAuthKeyGenerator.generate()
        let foreign = JWTSigner(key: try APNsSigningKey(pem: otherPair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
        let good = try fixture.signer.sign(issuedAt: now).split(separator: ".")
        let hs256Header = Base64URL.encode(Array(#"{"alg":"HS256","kid":"ABC123DEFG"}"#.utf8))

        let tokens = [
            try unknownKey.sign(issuedAt: now), try wrongTeam.sign(issuedAt: now), try foreign.sign(issuedAt: now),
            "\(hs256Header).\(good[1]).\(good[2])",
        ]
        for token in tokens {
            #expect(throws: JWTVerificationError.self) { try fixture.verifier.verify(token) }
            do { _ = try fixture.verifier.verify(token) } catch { #expect(error.reason == .invalidProviderToken) }
        }
    }

    @Test func expiresTokensOlderThanOneHourByTheInjectedClock() throws {
        let fixture = try Fixture()
        let issuedAt = fixture.clock.now
        let jwt = try fixture.signer.sign(issuedAt: issuedAt)
        fixture.clock.advance(by: 3600)
        #expect(try fixture.verifier.verify(jwt).issuedAt == issuedAt)
        fixture.clock.advance(by: 1)
        #expect(throws: JWTVerificationError.expired(issuedAt: issuedAt)) { try fixture.verifier.verify(jwt) }
        #expect(JWTVerificationError.expired(issuedAt: issuedAt).reason == .expiredProviderToken)
    }

    @Test func rejectsTokensFromTheFarFuture() throws {
        let fixture = try Fixture()
        let jwt = try fixture.signer.sign(issuedAt: fixture.clock.now + 3600)
        do {
            _ = try fixture.verifier.verify(jwt)
            Issue.record("accepted a future token")
        } catch {
            #expect(error.reason == .invalidProviderToken)
        }
    }

    @Test func extremeIssueTimesAreRefusedWithoutOverflowing() throws {
        let fixture = try Fixture()
        let ancient = try fixture.signer.sign(issuedAt: .min)
        #expect(throws: JWTVerificationError.expired(issuedAt: .min)) { try fixture.verifier.verify(ancient) }
        let distant = try fixture.signer.sign(issuedAt: .max)
        #expect(throws: JWTVerificationError.invalidToken("iat is in the future")) { try fixture.verifier.verify(distant) }
        // A clock before 1970 puts the far future beyond Int64 too.
        fixture.clock.advance(by: -fixture.clock.now - 1)
        #expect(throws: JWTVerificationError.invalidToken("iat is in the future")) { try fixture.verifier.verify(distant) }
        #expect(throws: JWTVerificationError.expired(issuedAt: .min)) { try fixture.verifier.verify(ancient) }
    }
}
