#if canImport(Glibc)
import Glibc
#endif

/// Tests on eight bytes at once (one little-endian `UInt64` load), for scanners that skip the
/// bytes of JSON strings that need no attention: tokens, ids and topics are all such bytes.
public enum ByteScan {
    /// Whether any of the eight bytes in `word` is below 0x20, a quote or a backslash. Exact: the
    /// zero-byte test `(x - 0x01…) & ~x & 0x80…` has no false positives.
    @inlinable
    public static func hasControlQuoteOrBackslash(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below0x20 = (word &- ones &* 0x20) & ~word & highs
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        return below0x20 | ((quote &- ones) & ~quote & highs) | ((backslash &- ones) & ~backslash & highs) != 0
    }

    /// Whether any of the eight bytes in `word` is 0x80 or above (part of a multi-byte UTF-8
    /// sequence).
    @inlinable
    public static func hasNonASCII(_ word: UInt64) -> Bool {
        word & 0x8080_8080_8080_8080 != 0
    }

    /// The index past the whole words of eight bytes, from `start` on, that hold no control
    /// character, quote or backslash (and, with `stoppingAtNonASCII`, no byte of 0x80 or above).
    /// The bytes from there on are left to the caller's byte-by-byte loop.
    @inlinable
    public static func skipPlainWords(in bytes: UnsafeBufferPointer<UInt8>, from start: Int,
                                      stoppingAtNonASCII: Bool) -> Int {
        var index = start
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return index }
        while index + 8 <= bytes.count {
            let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            if hasControlQuoteOrBackslash(word) || (stoppingAtNonASCII && hasNonASCII(word)) { break }
            index += 8
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
