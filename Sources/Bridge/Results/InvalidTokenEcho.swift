/// How a malformed token string is written back in its `invalid` result and its invalid-token
/// record (the record's key and value).
///
/// A request may carry any string as a token, up to the size of the record. Echoed whole, a
/// string of half a megabyte would make an invalid-token record (key and value) that Kafka
/// refuses (`message.max.bytes`): that refusal is fatal to the bridge, and the record would stop
/// its partition on every restart. So a string longer than ``maximumBytes`` is echoed as its
/// first ``maximumBytes`` bytes (cut on a character boundary) followed by `…`. Real device
/// tokens (at most 200 hex digits) are always echoed whole. Duplicates are found on the whole
/// strings before any cut.
public enum InvalidTokenEcho {
    /// The longest token string echoed whole, in UTF-8 bytes.
    public static let maximumBytes = 256

    /// `text`, or its cut form when it is longer than ``maximumBytes``.
    public static func echoed(_ text: String) -> String {
        guard text.utf8.count > maximumBytes else { return text }
        var end = text.utf8.index(text.utf8.startIndex, offsetBy: maximumBytes)
        // Back to the start of the character the cut falls in (a continuation byte is 10xxxxxx).
        while end > text.utf8.startIndex, text.utf8[end] & 0xC0 == 0x80 {
            end = text.utf8.index(before: end)
        }
        return String(decoding: text.utf8[..<end], as: UTF8.self) + "…"
    }
}
