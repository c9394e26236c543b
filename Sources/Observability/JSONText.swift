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
    public static func appendQuoted(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(UInt8(ascii: "\\")); output.append(byte)
            case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\")); output.append(byte)
            case 0x0A: output.append(UInt8(ascii: "\\")); output.append(UInt8(ascii: "n"))
            case 0x0D: output.append(UInt8(ascii: "\\")); output.append(UInt8(ascii: "r"))
            case 0x09: output.append(UInt8(ascii: "\\")); output.append(UInt8(ascii: "t"))
            case 0..<0x20:
                let digits: [UInt8] = Array("0123456789abcdef".utf8)
                output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                output.append(digits[Int(byte >> 4)])
                output.append(digits[Int(byte & 0xF)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
