import Foundation
import Testing
@testable import APNs

@Suite struct JWTSignerTests {
    private func decodeJSON(_ part: Substring) throws -> [String: Any] {
        let bytes = try #require(Base64URL.decode(part))
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func signsAnES256TokenThatOpenSSLVerifies() throws {
        let pair = try APNsAuthKeyGenerator.generate()
        let signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
        let jwt = try signer.sign(issuedAt: 1_800_000_000)
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        #expect(!jwt.contains("=") && !jwt.contains("+") && !jwt.contains("/"))

        let header = try decodeJSON(parts[0])
        #expect(header.count == 2)
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "ABC123DEFG")
        let claims = try decodeJSON(parts[1])
        #expect(claims.count == 2)
        #expect(claims["iss"] as? String == "TEAM123456")
        #expect((claims["iat"] as? NSNumber)?.int64Value == 1_800_000_000)

        #expect(Base64URL.decode(parts[2])?.count == 64)
        #expect(opensslVerifies(jwt: jwt, publicKeyPEM: pair.publicKeyPEM))
    }

    @Test func signatureFailsWithAnotherKeyOrAlteredClaims() throws {
        let pair = try APNsAuthKeyGenerator.generate()
        let other = try APNsAuthKeyGenerator.generate()
        let signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
        let jwt = try signer.sign(issuedAt: 1_800_000_000)
        #expect(!opensslVerifies(jwt: jwt, publicKeyPEM: other.publicKeyPEM))

        let parts = jwt.split(separator: ".")
        let forgedClaims = Base64URL.encode(Array(#"{"iss":"TEAM123456","iat":1800000001}"#.utf8))
        #expect(!opensslVerifies(jwt: "\(parts[0]).\(forgedClaims).\(parts[2])", publicKeyPEM: pair.publicKeyPEM))
    }

    @Test func everySignatureIsSixtyFourBytesAndVerifies() throws {
        let pair = try APNsAuthKeyGenerator.generate()
        let signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "K", teamID: "T")
        // ECDSA is randomised: across many signatures some r or s have leading zero bytes,
        // which exercises the left padding.
        for second in 0..<64 {
            let jwt = try signer.sign(issuedAt: Int64(second))
            let signature = try #require(jwt.split(separator: ".").last)
            #expect(Base64URL.decode(signature)?.count == 64)
            #expect(opensslVerifies(jwt: jwt, publicKeyPEM: pair.publicKeyPEM))
        }
    }

    @Test func escapesKeyAndTeamIDsAsJSON() throws {
        let pair = try APNsAuthKeyGenerator.generate()
        let signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: #"a"b"#, teamID: #"t\"#)
        let parts = try signer.sign(issuedAt: 5).split(separator: ".")
        #expect(try decodeJSON(parts[0])["kid"] as? String == #"a"b"#)
        #expect(try decodeJSON(parts[1])["iss"] as? String == #"t\"#)
    }
}
