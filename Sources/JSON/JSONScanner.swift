import Observability

/// A strict RFC 8259 JSON parser over raw bytes, without Foundation.
///
/// It accepts exactly the JSON grammar (any value at the top level, surrounded by optional
/// whitespace), requires well-formed UTF-8 everywhere (no overlong forms, no encoded surrogates),
/// rejects `\u` escapes that leave a surrogate unpaired, control characters in strings, a byte
/// order mark, and nesting deeper than `maximumDepth`. It never traps on any input: every
/// problem is a ``JSONError`` with a line and column.
public enum JSONScanner {
    /// Default nesting limit for arrays and objects.
    public static let defaultMaximumDepth = 100

    /// The largest input `parse` takes (positions are kept in 32 bits); far above any Kafka record.
    public static let maximumInputBytes = Int(UInt32.max) - 1

    /// Parses `bytes` into a ``JSONDocument``.
    public static func parse(_ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(JSONError) -> JSONDocument {
        guard bytes.count <= maximumInputBytes else {
            throw JSONError(kind: .tooLarge, byteOffset: 0, line: 1, column: 1,
                            message: "\(bytes.count) bytes, the limit is \(maximumInputBytes)")
        }
        let result: Result<[JSONNode], JSONError> = bytes.withUnsafeBufferPointer { buffer in
            var state = JSONScannerState(bytes: buffer, maximumDepth: maximumDepth)
            do throws(JSONError) {
                try state.parseDocument()
                return .success(state.nodes)
            } catch {
                return .failure(error)
            }
        }
        return JSONDocument(bytes: bytes, nodes: try result.get())
    }

    /// Checks the one value whose first byte is at `start`, as `parse` checks a value inside a
    /// document nested `enclosingContainers` deep (1 for a member of the top-level object),
    /// without building a tape, and returns the index just past it. For a reader that takes the
    /// rest of a document apart itself and needs only to know that a value is valid JSON, and
    /// where it ends. `bytes` must be at most `maximumInputBytes` long.
    public static func validateValue(in bytes: UnsafeBufferPointer<UInt8>, at start: Int, enclosingContainers: Int,
                                     maximumDepth: Int = defaultMaximumDepth) throws(JSONError) -> Int {
        precondition(start >= 0, "a value's first byte is inside the input")  // the caller's index, never negative
        var state = JSONScannerState(bytes: bytes, maximumDepth: maximumDepth, recordsNodes: false)
        state.index = start
        try state.parseValue(depth: enclosingContainers)
        return state.index
    }
}

/// The recursive-descent state: position in the input and the tape built so far.
struct JSONScannerState {
    let bytes: UnsafeBufferPointer<UInt8>
    let maximumDepth: Int
    /// False when only validating (`JSONScanner.validateValue`): no node is stored.
    let recordsNodes: Bool
    var index = 0
    var nodes: [JSONNode] = []

    init(bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int, recordsNodes: Bool = true) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        self.recordsNodes = recordsNodes
        // About one node per six bytes in push requests (keys, short strings, small objects):
        // one allocation for most documents instead of growing from 16, capped for large ones.
        if recordsNodes { nodes.reserveCapacity(max(16, min(bytes.count / 6, 1024))) }
    }

    /// Stores a leaf value's node (strings, numbers, literals) unless only validating.
    @inline(__always)
    mutating func recordLeaf(_ tag: JSONNode.Tag, hasEscapes: Bool = false, start: Int) {
        guard recordsNodes else { return }
        nodes.append(JSONNode(tag: tag, hasEscapes: hasEscapes, start: start, end: index, next: nodes.count + 1, count: 0))
    }

    mutating func parseDocument() throws(JSONError) {
        skipWhitespace()
        try parseValue(depth: 0)
        skipWhitespace()
        if index < bytes.count {
            throw unexpected("end of input after the top-level value")
        }
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONError) {
        guard index < bytes.count else { throw unexpected("a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): try parseString()
        case UInt8(ascii: "t"): try parseLiteral("true", tag: .trueValue)
        case UInt8(ascii: "f"): try parseLiteral("false", tag: .falseValue)
        case UInt8(ascii: "n"): try parseLiteral("null", tag: .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try parseNumber()
        default: throw unexpected("a value")
        }
    }

    mutating func beginContainer(_ tag: JSONNode.Tag, depth: Int) throws(JSONError) -> Int {
        guard depth <= maximumDepth else {
            throw error(.tooDeep, at: index, "nesting deeper than \(maximumDepth) levels")
        }
        index += 1
        guard recordsNodes else { return -1 }
        nodes.append(JSONNode(tag: tag, hasEscapes: false, start: index - 1, end: index - 1, next: 0, count: 0))
        return nodes.count - 1
    }

    mutating func endContainer(_ nodeIndex: Int, count: Int) {
        index += 1
        guard nodeIndex >= 0 else { return }
        nodes[nodeIndex].end = index
        nodes[nodeIndex].count = count
        nodes[nodeIndex].next = nodes.count
    }

    mutating func parseObject(depth: Int) throws(JSONError) {
        let nodeIndex = try beginContainer(.object, depth: depth)
        var count = 0
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            endContainer(nodeIndex, count: 0)
            return
        }
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw unexpected("a string (member name)")
            }
            try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw unexpected("':'") }
            index += 1
            skipWhitespace()
            try parseValue(depth: depth)
            count += 1
            skipWhitespace()
            guard index < bytes.count else { throw unexpected("',' or '}'") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                endContainer(nodeIndex, count: count)
                return
            default:
                throw unexpected("',' or '}'")
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONError) {
        let nodeIndex = try beginContainer(.array, depth: depth)
        var count = 0
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            endContainer(nodeIndex, count: 0)
            return
        }
        while true {
            try parseValue(depth: depth)
            count += 1
            skipWhitespace()
            guard index < bytes.count else { throw unexpected("',' or ']'") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                endContainer(nodeIndex, count: count)
                return
            default:
                throw unexpected("',' or ']'")
            }
        }
    }

    mutating func parseLiteral(_ literal: StaticString, tag: JSONNode.Tag) throws(JSONError) {
        let start = index
        let length = literal.utf8CodeUnitCount
        let text = UnsafeBufferPointer(start: literal.utf8Start, count: length)
        for offset in 0..<length {
            guard index < bytes.count, bytes[index] == text[offset] else {
                throw unexpected("'\(literal)'")
            }
            index += 1
        }
        recordLeaf(tag, start: start)
    }

    @inline(__always)
    func isDigit(_ position: Int) -> Bool {
        position < bytes.count && bytes[position] >= UInt8(ascii: "0") && bytes[position] <= UInt8(ascii: "9")
    }

    mutating func parseNumber() throws(JSONError) {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { throw unexpected("a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if isDigit(index) { throw error(.syntax, at: index, "leading zeros are not allowed in numbers") }
        } else {
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { throw unexpected("a digit after '.'") }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard isDigit(index) else { throw unexpected("a digit in the exponent") }
            while isDigit(index) { index += 1 }
        }
        recordLeaf(.number, start: start)
    }

    mutating func parseString() throws(JSONError) {
        let start = index
        index += 1  // opening quote
        var hasEscapes = false
        while true {
            // Straight to the next byte that is not plain ASCII: most strings end at the first.
            index = ByteScan.firstAttentionByte(in: bytes, from: index, stoppingAtNonASCII: true)
            guard index < bytes.count else {
                throw error(.syntax, at: index, "unterminated string (started at byte \(start))")
            }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                break
            } else if byte == UInt8(ascii: "\\") {
                hasEscapes = true
                try parseEscape()
            } else if byte < 0x20 {
                throw error(.syntax, at: index, "control character U+00\(Self.hex2(byte)) must be escaped in a string")
            } else if let length = UTF8Validation.sequenceLength(bytes, at: index) {
                index += length
            } else {
                throw error(.invalidUTF8, at: index, "invalid UTF-8")
            }
        }
        recordLeaf(.string, hasEscapes: hasEscapes, start: start)
    }

    /// Validates one escape sequence starting at the backslash.
    mutating func parseEscape() throws(JSONError) {
        let escapeStart = index
        index += 1
        guard index < bytes.count else { throw unexpected("an escape character") }
        switch bytes[index] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
             UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            index += 1
        case UInt8(ascii: "u"):
            index += 1
            let unit = try parseHex4()
            if (0xDC00...0xDFFF).contains(unit) {
                throw error(.syntax, at: escapeStart, "unpaired low surrogate \\u\(Self.hex4(unit))")
            }
            if (0xD800...0xDBFF).contains(unit) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw error(.syntax, at: escapeStart, "unpaired high surrogate \\u\(Self.hex4(unit))")
                }
                index += 2
                let low = try parseHex4()
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw error(.syntax, at: escapeStart, "unpaired high surrogate \\u\(Self.hex4(unit))")
                }
            }
        default:
            throw error(.syntax, at: index, "invalid escape sequence")
        }
    }

    mutating func parseHex4() throws(JSONError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard index < bytes.count, let digit = JSONStringDecoding.hexDigit(bytes[index]) else {
                throw unexpected("a hex digit in \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    // MARK: Errors (cold path)

    /// "expected X but found Y" at the current index; reports malformed UTF-8 as such.
    func unexpected(_ expected: String) -> JSONError {
        guard index < bytes.count else {
            return error(.syntax, at: index, "unexpected end of input, expected \(expected)")
        }
        let byte = bytes[index]
        if byte >= 0x80, UTF8Validation.sequenceLength(bytes, at: index) == nil {
            return error(.invalidUTF8, at: index, "invalid UTF-8")
        }
        let found: String
        if byte >= 0x21, byte < 0x7F {
            found = "'\(Character(Unicode.Scalar(byte)))'"
        } else if byte < 0x80 {
            found = "byte 0x\(Self.hex2(byte))"
        } else {
            found = "a non-ASCII character"
        }
        return error(.syntax, at: index, "expected \(expected) but found \(found)")
    }

    func error(_ kind: JSONError.Kind, at offset: Int, _ message: String) -> JSONError {
        var line = 1
        var column = 1
        var position = 0
        let end = min(offset, bytes.count)
        while position < end {
            let byte = bytes[position]
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1  // count characters: skip UTF-8 continuation bytes
            }
            position += 1
        }
        return JSONError(kind: kind, byteOffset: offset, line: line, column: column, message: message)
    }

    static func hex2(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }

    static func hex4(_ value: UInt32) -> String {
        hex2(UInt8(value >> 8 & 0xFF)) + hex2(UInt8(value & 0xFF))
    }
}
