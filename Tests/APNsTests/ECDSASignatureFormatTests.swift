import Testing
@testable import APNs

@Suite struct ECDSASignatureFormatTests {
    @Test func convertsShortScalarsWithLeftPadding() throws {
        // r = 0x01, s = 0x7f: minimal DER integers.
        let der: [UInt8] = [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x7F]
        let raw = try #require(ECDSASignatureFormat.rawSignature(fromDER: der))
        #expect(raw.count == 64)
        #expect(raw[31] == 0x01 && raw[0..<31].allSatisfy { $0 == 0 })
        #expect(raw[63] == 0x7F && raw[32..<63].allSatisfy { $0 == 0 })
        #expect(ECDSASignatureFormat.derSignature(fromRaw: raw) == der)
    }

    @Test func handlesHighBitScalarsWithALeadingZero() throws {
        let r = [UInt8](repeating: 0xFF, count: 32)
        let s = [UInt8](repeating: 0x80, count: 32)
        let der = try #require(ECDSASignatureFormat.derSignature(fromRaw: r + s))
        #expect(der.count == 2 + 2 * 35)
        #expect(Array(der[0..<5]) == [0x30, 70, 0x02, 33, 0x00])
        #expect(ECDSASignatureFormat.rawSignature(fromDER: der) == r + s)
        // OpenSSL's own encoder agrees with ours.
        #expect(JWTVerifier.derSignatureViaOpenSSL(r + s) == der)
    }

    @Test func agreesWithOpenSSLForManyValues() {
        for seed in 0..<50 {
            var raw = (0..<64).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ (seed &* 97)) }
            if seed % 3 == 0 { raw.replaceSubrange(0..<(seed % 5 + 1), with: repeatElement(0, count: seed % 5 + 1)) }
            raw[0] |= seed % 2 == 0 ? 0 : 0x80
            raw[40] = 1
            #expect(ECDSASignatureFormat.derSignature(fromRaw: raw) == JWTVerifier.derSignatureViaOpenSSL(raw))
        }
    }

    @Test func rejectsMalformedDER() {
        #expect(ECDSASignatureFormat.rawSignature(fromDER: []) == nil)
        #expect(ECDSASignatureFormat.rawSignature(fromDER: [0x30, 0x03, 0x02, 0x01, 0x01]) == nil)   // no s
        #expect(ECDSASignatureFormat.rawSignature(fromDER: [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x00]) == nil)
        #expect(ECDSASignatureFormat.rawSignature(fromDER: [0x30, 0x06, 0x02, 0x01, 0x81, 0x02, 0x01, 0x01]) == nil) // negative
        #expect(ECDSASignatureFormat.rawSignature(fromDER: [0x30, 0x09, 0x02, 0x04, 0x01, 0x01]) == nil)  // truncated
        let tooLong: [UInt8] = [0x30, 0x26, 0x02, 0x21, 0x01] + [UInt8](repeating: 1, count: 32) + [0x02, 0x01, 0x01]
        #expect(ECDSASignatureFormat.rawSignature(fromDER: tooLong) == nil)
        #expect(ECDSASignatureFormat.derSignature(fromRaw: [1, 2, 3]) == nil)
    }
}
