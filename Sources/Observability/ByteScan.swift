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
}
