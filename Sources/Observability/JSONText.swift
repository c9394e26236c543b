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

    /// Appends `value` as a quoted, escaped JSON string to a byte buffer.
    ///
    /// Runs of bytes that need no escape (all of a token, an id or a topic) are appended in one
    /// copy each; only quotes, backslashes and control characters are written one by one.
    public static func appendQuoted(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            var runStart = 0
            for index in bytes.indices where bytes[index] < 0x20 || bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "\\") {
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                appendEscape(bytes[index], to: &output)
                runStart = index + 1
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        output.append(UInt8(ascii: "\""))
    }

    /// The escape sequence of a quote, a backslash or a control character.
    private static func appendEscape(_ byte: UInt8, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\\"))
        switch byte {
        case 0x0A: output.append(UInt8(ascii: "n"))
        case 0x0D: output.append(UInt8(ascii: "r"))
        case 0x09: output.append(UInt8(ascii: "t"))
        case 0..<0x20:
            let digits: StaticString = "0123456789abcdef"
            output.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            output.append(digits.utf8Start[Int(byte >> 4)])
            output.append(digits.utf8Start[Int(byte & 0xF)])
        default: output.append(byte)
        }
    }
}
