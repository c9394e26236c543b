import Foundation

/// PKCS#8 PEM private keys on P-256 written byte by byte, so a test can give them a private
/// scalar no key generator would produce (0, the curve order n, above n) or a public key that
/// does not belong to the scalar.
enum HandMadeP256Keys {
    /// n, the order of P-256's base point.
    static let order = hexBytes("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551")
    /// n + 1.
    static let orderPlusOne = hexBytes("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632552")
    /// The base point G, uncompressed (04 ‖ x ‖ y): the public key of the scalar 1.
    static let generator = hexBytes(
        "04" + "6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296"
            + "4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5")

    /// A 32-byte big-endian scalar whose last byte is `value` (the others zero).
    static func scalar(_ value: UInt8) -> [UInt8] { [UInt8](repeating: 0, count: 31) + [value] }

    /// `-----BEGIN PRIVATE KEY-----`: a PrivateKeyInfo (RFC 5208) for id-ecPublicKey on
    /// prime256v1 around an ECPrivateKey (RFC 5915) with `scalar` (32 bytes) and, when given,
    /// `publicKey` (uncompressed point). Without a public key, OpenSSL computes it on loading.
    static func pem(scalar: [UInt8], publicKey: [UInt8]? = nil) -> String {
        precondition(scalar.count == 32, "a P-256 scalar is 32 bytes")
        var ecPrivateKey = der(0x02, [1]) + der(0x04, scalar)
        if let publicKey { ecPrivateKey += der(0xA1, der(0x03, [0] + publicKey)) }
        let ecPublicKeyOID: [UInt8] = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
        let prime256v1OID: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        let info = der(0x30, der(0x02, [0]) + der(0x30, ecPublicKeyOID + prime256v1OID) + der(0x04, der(0x30, ecPrivateKey)))
        let body = Data(info).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN PRIVATE KEY-----\n\(body)\n-----END PRIVATE KEY-----\n"
    }

    /// One DER element: tag, definite length (short or long form), contents.
    private static func der(_ tag: UInt8, _ contents: [UInt8]) -> [UInt8] {
        let count = contents.count
        let length: [UInt8] = count < 0x80 ? [UInt8(count)] : count <= 0xFF ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        return [tag] + length + contents
    }

    private static func hexBytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { index in
            // The constants above are well-formed hex.
            UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) ?? 0
        }
    }
}
