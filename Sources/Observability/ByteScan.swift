#if canImport(Glibc)
import Glibc
#endif

/// Tests on eight bytes at once (one little-endian `UInt64` load), for scanners that skip the
/// bytes of JSON strings that need no attention: tokens, ids and topics are all such bytes.
public enum ByteScan {
    /// One bit (the high bit of its byte) for each of the eight bytes in `word`, loaded
    /// little-endian, that is below 0x20, a quote or a backslash (and, with `nonASCII`, 0x80 or
    /// above). Exact for the lowest flagged byte: each zero-byte test `(x - 0x01…) & ~x & 0x80…`
    /// flags a byte falsely only above a true match, where its borrow carries.
    @inlinable
    public static func attentionMask(_ word: UInt64, nonASCII: Bool) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below0x20 = (word &- ones &* 0x20) & ~word & highs
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let mask = below0x20 | ((quote &- ones) & ~quote & highs) | ((backslash &- ones) & ~backslash & highs)
        return nonASCII ? mask | (word & highs) : mask
    }

    /// The index of the first byte from `start` on that a JSON string scanner must look at (below
    /// 0x20, a quote or a backslash; with `stoppingAtNonASCII`, also 0x80 or above), or
    /// `bytes.count` when there is none. Eight bytes at a time while at least eight are left, the
    /// position taken from the word's mask; the last few bytes one by one.
    @inlinable
    public static func firstAttentionByte(in bytes: UnsafeBufferPointer<UInt8>, from start: Int,
                                          stoppingAtNonASCII: Bool) -> Int {
        var index = start
        if let base = UnsafeRawPointer(bytes.baseAddress) {
            while index + 8 <= bytes.count {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let mask = attentionMask(word, nonASCII: stoppingAtNonASCII)
                if mask != 0 { return index + mask.trailingZeroBitCount >> 3 }
                index += 8
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || (stoppingAtNonASCII && byte >= 0x80) {
                return index
            }
            index += 1
        }
        return index
    }

    /// Whether `bytes` spell `text` exactly: one length check and one `memcmp`, for a parser
    /// looking for a few known names among the ones it reads (a generic comparison with a
    /// `String`'s UTF-8 view walks it through an iterator, some fifty times slower).
    @inlinable
    public static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        guard let base = bytes.baseAddress else { return bytes.isEmpty }
        return memcmp(base, text.utf8Start, bytes.count) == 0
    }
}
