/// Base64url without padding (RFC 4648 §5, RFC 7515 §2), as JWTs use it.
///
/// Written by hand so that signing and verifying JWTs needs no Foundation.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Reverse table: byte → 6-bit value, or 0xFF for bytes outside the alphabet.
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() {
            table[Int(byte)] = UInt8(index)
        }
        return table
    }()

    /// Encodes bytes as base64url without `=` padding.
    public static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(group >> 18 & 0x3F)])
            output.append(alphabet[Int(group >> 12 & 0x3F)])
            if second != nil { output.append(alphabet[Int(group >> 6 & 0x3F)]) }
            if third != nil { output.append(alphabet[Int(group & 0x3F)]) }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes base64url text without padding; returns nil for any byte outside the alphabet,
    /// for `=` padding, for an impossible length (1 mod 4) or for non-zero trailing bits.
    public static func decode<Text: StringProtocol>(_ text: Text) -> [UInt8]? {
        decode(bytes: Array(text.utf8))
    }

    /// Decodes base64url bytes without padding (see `decode(_:)`).
    public static func decode(bytes input: [UInt8]) -> [UInt8]? {
        if input.count % 4 == 1 { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in input {
            let value = decodeTable[Int(byte)]
            if value == 0xFF { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Canonical form only: the leftover bits must be zero.
        if accumulator != 0 { return nil }
        return output
    }
}
