import JSON
import Observability

extension ResultRecordEncoder {
    /// Room kept for the error code, detail and source when the original must be cut.
    static let deadLetterDetailLimit = 4096

    /// Appends a dead-letter record (contract §5) of at most `maximumBytes` bytes.
    ///
    /// `original` is the input value: written as a string with `original_encoding` `utf8` when it
    /// is valid UTF-8, else base64 with `base64`; a null input value gives
    /// `"original":null,"original_encoding":null`. When the whole record would not fit,
    /// `original` is cut (at a character boundary, so it stays valid UTF-8) and
    /// `"original_truncated":true,"original_size":N` (bytes of the input value) are added. JSON
    /// escaping can make a value six times longer (`\u0001`), so the cut is computed on the
    /// escaped length, never guessed from the input length.
    public static func appendDeadLetter(_ deadLetter: DeadLetter, source: RecordSource, original: [UInt8]?,
                                        maximumBytes: Int = .max, to buffer: inout [UInt8]) {
        let start = buffer.count
        append("{\"error\":", to: &buffer)
        JSONText.appendQuoted(deadLetter.code.rawValue, to: &buffer)
        append(",\"detail\":", to: &buffer)
        JSONText.appendQuoted(prefix(of: deadLetter.detail, utf8Bytes: deadLetterDetailLimit), to: &buffer)
        append(",\"source\":", to: &buffer)
        appendSource(source, to: &buffer)
        append(",\"original\":", to: &buffer)
        guard let original else {
            append("null,\"original_encoding\":null}", to: &buffer)
            return
        }
        let isUTF8 = UTF8Validation.isValid(original)
        let encodingField: StaticString = isUTF8 ? ",\"original_encoding\":\"utf8\"" : ",\"original_encoding\":\"base64\""
        let written = buffer.count - start
        let wholeSize = deadLetterOriginalBytes(original)
        if written + wholeSize + encodingField.utf8CodeUnitCount + 1 <= maximumBytes {
            appendOriginal(original[...], isUTF8: isUTF8, to: &buffer)
            append(encodingField, to: &buffer)
            buffer.append(UInt8(ascii: "}"))
            return
        }
        var truncationFields: [UInt8] = []
        append(",\"original_truncated\":true,\"original_size\":", to: &truncationFields)
        appendUnsigned(UInt64(original.count), to: &truncationFields)
        truncationFields.append(UInt8(ascii: "}"))
        let room = max(0, maximumBytes - written - 2 - encodingField.utf8CodeUnitCount - truncationFields.count)
        let kept = isUTF8 ? quotedContentLength(original, limit: room).inputBytes : room / 4 * 3
        appendOriginal(original[..<min(kept, original.count)], isUTF8: isUTF8, to: &buffer)
        append(encodingField, to: &buffer)
        buffer.append(contentsOf: truncationFields)
    }

    private static func appendOriginal(_ bytes: ArraySlice<UInt8>, isUTF8: Bool, to buffer: inout [UInt8]) {
        if isUTF8 {
            JSONText.appendQuoted(String(decoding: bytes, as: UTF8.self), to: &buffer)
        } else {
            buffer.append(UInt8(ascii: "\""))
            Base64.append(Array(bytes), to: &buffer)
            buffer.append(UInt8(ascii: "\""))
        }
    }

    /// The bytes `original` takes in a dead letter written whole: escaped as a JSON string when
    /// it is UTF-8 (a control byte takes six), else as base64.
    static func deadLetterOriginalBytes(_ original: [UInt8]) -> Int {
        2 + (UTF8Validation.isValid(original) ? quotedContentLength(original, limit: Int.max).length : base64Length(original.count))
    }

    /// Length of base64 text for `count` bytes.
    static func base64Length(_ count: Int) -> Int {
        (count + 2) / 3 * 4
    }

    /// How many leading bytes of valid UTF-8 `bytes` fit in `limit` bytes once escaped as the
    /// content of a JSON string (as `JSONText.appendQuoted` escapes), ending on a character
    /// boundary, and their escaped length.
    static func quotedContentLength(_ bytes: [UInt8], limit: Int) -> (inputBytes: Int, length: Int) {
        var length = 0
        var boundary = (inputBytes: 0, length: 0)
        for (index, byte) in bytes.enumerated() {
            if byte & 0xC0 != 0x80 {
                boundary = (index, length)  // a character starts here: everything before is whole
            }
            let escaped: Int = switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09: 2
            case 0..<0x20: 6
            default: 1
            }
            guard length + escaped <= limit else { return boundary }
            length += escaped
        }
        return (bytes.count, length)
    }

    /// The longest prefix of `text` of at most `utf8Bytes` bytes that ends on a character boundary.
    static func prefix(of text: String, utf8Bytes: Int) -> String {
        guard text.utf8.count > utf8Bytes else { return text }
        var end = text.utf8.index(text.utf8.startIndex, offsetBy: utf8Bytes)
        while end > text.utf8.startIndex, String.Index(end, within: text.unicodeScalars) == nil {
            end = text.utf8.index(before: end)
        }
        return String(text[..<end])
    }
}
