/// Conversions between the two encodings of an ECDSA P-256 signature:
/// OpenSSL's DER `SEQUENCE { INTEGER r, INTEGER s }` and JWS's fixed 64-byte `r ‖ s` (RFC 7518 §3.4).
public enum ECDSASignatureFormat {
    /// Byte length of one P-256 scalar (r or s) in the JWS form.
    public static let scalarLength = 32

    /// Converts a DER-encoded ECDSA signature into the 64-byte `r ‖ s` form, each left-padded with zeros.
    /// Returns nil when the DER is malformed, has trailing bytes, or a scalar longer than 32 bytes.
    public static func rawSignature(fromDER der: [UInt8]) -> [UInt8]? {
        var reader = DERReader(bytes: der)
        guard reader.readTag() == 0x30, let sequenceLength = reader.readLength(),
              sequenceLength == reader.remaining else { return nil }
        guard let r = reader.readPositiveInteger(), let s = reader.readPositiveInteger(),
              reader.remaining == 0 else { return nil }
        guard r.count <= scalarLength, s.count <= scalarLength else { return nil }
        var raw = [UInt8](repeating: 0, count: scalarLength * 2)
        raw.replaceSubrange((scalarLength - r.count)..<scalarLength, with: r)
        raw.replaceSubrange((scalarLength * 2 - s.count)..<(scalarLength * 2), with: s)
        return raw
    }

    /// Converts a 64-byte `r ‖ s` signature into DER. Returns nil when the input is not 64 bytes.
    public static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == scalarLength * 2 else { return nil }
        let r = derInteger(raw[0..<scalarLength])
        let s = derInteger(raw[scalarLength..<(scalarLength * 2)])
        // At most 2 × (2 + 33) = 70 content bytes: the short length form always fits.
        return [0x30, UInt8(r.count + s.count)] + r + s
    }

    /// Encodes an unsigned big-endian scalar as a minimal DER INTEGER (tag, length, value).
    private static func derInteger(_ scalar: ArraySlice<UInt8>) -> [UInt8] {
        var value = Array(scalar.drop(while: { $0 == 0 }))
        if value.isEmpty { value = [0] }
        if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return [0x02, UInt8(value.count)] + value
    }
}

/// A bounds-checked reader over DER bytes; every read returns nil instead of trapping.
private struct DERReader {
    let bytes: [UInt8]
    var offset = 0

    var remaining: Int { bytes.count - offset }

    mutating func readTag() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads a definite length in short or long (up to 2 length bytes) form.
    mutating func readLength() -> Int? {
        guard let first = readTag() else { return nil }
        if first < 0x80 { return Int(first) }
        let count = Int(first & 0x7F)
        guard count >= 1, count <= 2, remaining >= count else { return nil }
        var length = 0
        for _ in 0..<count {
            length = length << 8 | Int(bytes[offset])
            offset += 1
        }
        return length
    }

    /// Reads an INTEGER that must be positive; returns its magnitude without leading zeros.
    mutating func readPositiveInteger() -> [UInt8]? {
        guard readTag() == 0x02, let length = readLength(), length >= 1, length <= remaining else { return nil }
        let value = bytes[offset..<(offset + length)]
        offset += length
        guard value[value.startIndex] & 0x80 == 0 else { return nil }   // negative: not a valid r or s
        return Array(value.drop(while: { $0 == 0 }))
    }
}
