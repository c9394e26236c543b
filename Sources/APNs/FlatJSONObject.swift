/// A value of a top-level JSON object member, as far as the APNs code needs to look.
enum FlatJSONValue: Equatable, Sendable {
    case string(String)
    case integer(Int64)
    /// A number that is not an integer fitting Int64 (kept as its text).
    case otherNumber(String)
    case bool(Bool)
    case null
    /// A nested object or array; skipped, not decoded.
    case nested
}

/// A small hand-written parser for one JSON object whose members we read by name: JWT headers and
/// claims, and APNs error bodies (`{"reason":"…","timestamp":…}`). No Foundation on the answer path.
///
/// Strict where it matters for security: duplicate member names, trailing bytes and malformed
/// input all make `parse` return nil.
enum FlatJSONObject {
    /// Parses `bytes` as a JSON object; nil when it is not exactly one well-formed object.
    static func parse(_ bytes: [UInt8]) -> [String: FlatJSONValue]? {
        var parser = Parser(bytes: bytes)
        guard let object = parser.parseObject() else { return nil }
        parser.skipWhitespace()
        return parser.offset == bytes.count ? object : nil
    }

    private struct Parser {
        let bytes: [UInt8]
        var offset = 0

        var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { offset += 1 }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            skipWhitespace()
            guard current == byte else { return false }
            offset += 1
            return true
        }

        mutating func parseObject() -> [String: FlatJSONValue]? {
            guard consume(UInt8(ascii: "{")) else { return nil }
            var object: [String: FlatJSONValue] = [:]
            if consume(UInt8(ascii: "}")) { return object }
            repeat {
                skipWhitespace()
                guard let name = parseString(), consume(UInt8(ascii: ":")), let value = parseValue() else { return nil }
                guard object.updateValue(value, forKey: name) == nil else { return nil }   // duplicate name
            } while consume(UInt8(ascii: ","))
            return consume(UInt8(ascii: "}")) ? object : nil
        }

        mutating func parseValue() -> FlatJSONValue? {
            skipWhitespace()
            guard let byte = current else { return nil }
            switch byte {
            case UInt8(ascii: "\""): return parseString().map(FlatJSONValue.string)
            case UInt8(ascii: "{"), UInt8(ascii: "["): return skipNested() ? .nested : nil
            case UInt8(ascii: "t"): return parseLiteral("true", .bool(true))
            case UInt8(ascii: "f"): return parseLiteral("false", .bool(false))
            case UInt8(ascii: "n"): return parseLiteral("null", .null)
            default: return parseNumber()
            }
        }

        mutating func parseLiteral(_ word: String, _ value: FlatJSONValue) -> FlatJSONValue? {
            let literal = Array(word.utf8)
            guard offset + literal.count <= bytes.count, Array(bytes[offset..<(offset + literal.count)]) == literal else {
                return nil
            }
            offset += literal.count
            return value
        }

        mutating func parseNumber() -> FlatJSONValue? {
            let start = offset
            if current == UInt8(ascii: "-") { offset += 1 }
            let integerStart = offset
            while let byte = current, byte >= 0x30, byte <= 0x39 { offset += 1 }
            let integerDigits = offset - integerStart
            guard integerDigits > 0 else { return nil }
            guard integerDigits == 1 || bytes[integerStart] != 0x30 else { return nil }   // no leading zeros
            var isInteger = true
            if current == UInt8(ascii: ".") {
                isInteger = false
                offset += 1
                let fractionStart = offset
                while let byte = current, byte >= 0x30, byte <= 0x39 { offset += 1 }
                guard offset > fractionStart else { return nil }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                isInteger = false
                offset += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
                let exponentStart = offset
                while let byte = current, byte >= 0x30, byte <= 0x39 { offset += 1 }
                guard offset > exponentStart else { return nil }
            }
            let text = String(decoding: bytes[start..<offset], as: UTF8.self)
            if isInteger, let value = Int64(text) { return .integer(value) }
            return .otherNumber(text)
        }

        /// Parses a string at `offset` (which must be at its opening quote), decoding escapes.
        mutating func parseString() -> String? {
            guard current == UInt8(ascii: "\"") else { return nil }
            offset += 1
            var output: [UInt8] = []
            while let byte = current {
                offset += 1
                switch byte {
                case UInt8(ascii: "\""):
                    // Reject invalid UTF-8 rather than silently repairing it.
                    return String(validating: output, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escaped = current else { return nil }
                    offset += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(escaped)
                    case UInt8(ascii: "b"): output.append(0x08)
                    case UInt8(ascii: "f"): output.append(0x0C)
                    case UInt8(ascii: "n"): output.append(0x0A)
                    case UInt8(ascii: "r"): output.append(0x0D)
                    case UInt8(ascii: "t"): output.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let scalar = parseUnicodeEscape() else { return nil }
                        output.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default: return nil
                    }
                case 0..<0x20:
                    return nil
                default:
                    output.append(byte)
                }
            }
            return nil
        }

        /// Parses the hex digits after `\u`, combining a surrogate pair when present.
        mutating func parseUnicodeEscape() -> Unicode.Scalar? {
            guard let high = parseHex4() else { return nil }
            if high >= 0xD800, high < 0xDC00 {
                guard consumeLiteral("\\u"), let low = parseHex4(), low >= 0xDC00, low < 0xE000 else { return nil }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            }
            return Unicode.Scalar(high)
        }

        mutating func consumeLiteral(_ text: String) -> Bool {
            parseLiteral(text, .null) != nil
        }

        mutating func parseHex4() -> UInt32? {
            guard offset + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[offset]
                offset += 1
                let digit: UInt32
                switch byte {
                case 0x30...0x39: digit = UInt32(byte - 0x30)
                case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                default: return nil
                }
                value = value << 4 | digit
            }
            return value
        }

        /// Skips a nested object or array, checking only bracket balance and strings (depth ≤ 64).
        mutating func skipNested() -> Bool {
            var stack: [UInt8] = []
            while let byte = current {
                switch byte {
                case UInt8(ascii: "\""):
                    guard parseString() != nil else { return false }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    stack.append(byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]"))
                    guard stack.count <= 64 else { return false }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    guard stack.popLast() == byte else { return false }
                    if stack.isEmpty {
                        offset += 1
                        return true
                    }
                default:
                    break
                }
                offset += 1
            }
            return false
        }
    }
}
