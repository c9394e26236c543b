/// Writing JSON string literals by hand, for log lines and result records on hot paths.
public enum JSONText {
    /// Appends `value` as a quoted, escaped JSON string.
    public static func appendQuoted(_ value: String, to output: inout String) {
        output += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    output.unicodeScalars.append(scalar)
                }
            }
        }
        output += "\""
    }

    /// Appends `value` as a quoted, escaped JSON string to a byte buffer
    /// (``ByteWriter/writeQuoted(_:)``).
    public static func appendQuoted(_ value: String, to output: inout [UInt8]) {
        output.appendWriting(maxBytes: ByteWriter.quotedMaxBytes(value)) { $0.writeQuoted(value) }
    }
}
