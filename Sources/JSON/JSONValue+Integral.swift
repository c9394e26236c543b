extension JSONValue {
    /// The number as an Int64 when its value is a whole number that fits, however it is written:
    /// `10`, `10.0`, `1e1`, `1.5E+1` and `100e-2` are all whole numbers (JSON Schema's `integer`:
    /// a number with no fractional part). Nil for a fraction (`1.5`, `1e-1`), a value outside
    /// Int64 and for non-numbers. The work is linear in the number's length whatever its exponent
    /// (`1e999999999` is read without building the number).
    public var integralValue: Int64? {
        let node = self.node
        guard node.tag == .number else { return nil }
        return document.bytes.withUnsafeBufferPointer { buffer in
            IntegralNumber(UnsafeBufferPointer(rebasing: buffer[node.start..<node.end]))?.value
        }
    }
}

/// A JSON number's text read as sign, significant digits and a power of ten: the significant
/// digits are the mantissa's digits from its first non-zero one to its last non-zero one, and
/// `scale` is the power of ten they are multiplied by.
private struct IntegralNumber {
    private let text: UnsafeBufferPointer<UInt8>
    private var negative = false
    /// Where the first and last non-zero mantissa digits are in `text`; nil for a zero mantissa.
    private var significant: (first: Int, last: Int)?
    /// Mantissa digits after the last non-zero one, the decimal point's digits subtracted, the
    /// exponent added (saturated: only its sign matters once it is this large).
    private var scale = 0

    /// An exponent beyond this many digits' worth is out of Int64's range in either direction
    /// for any mantissa the scanner accepted.
    private static let exponentLimit = 1 << 40

    /// Reads `text`, a number the JSON scanner accepted (`-?digits(.digits)?([eE][+-]?digits)?`).
    init?(_ text: UnsafeBufferPointer<UInt8>) {
        self.text = text
        var index = 0
        if index < text.count, text[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        var fractionDigits = 0
        var inFraction = false
        var trailingZeros = 0
        while index < text.count {
            let byte = text[index]
            if byte == UInt8(ascii: ".") {
                inFraction = true
            } else if byte &- UInt8(ascii: "0") < 10 {
                if inFraction { fractionDigits += 1 }
                if byte == UInt8(ascii: "0") {
                    trailingZeros += 1
                } else {
                    significant = (significant?.first ?? index, index)
                    trailingZeros = 0
                }
            } else {
                break
            }
            index += 1
        }
        guard let exponent = Self.exponent(text, from: index) else { return nil }
        scale = exponent - fractionDigits + trailingZeros
    }

    /// The exponent after `index` (`e`, `E`, a sign and digits; 0 when there is none),
    /// saturated at ±`exponentLimit`; nil for anything else after the mantissa.
    private static func exponent(_ text: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var index = start
        guard index < text.count else { return 0 }
        guard text[index] | 0x20 == UInt8(ascii: "e") else { return nil }
        index += 1
        var sign = 1
        if index < text.count, text[index] == UInt8(ascii: "+") || text[index] == UInt8(ascii: "-") {
            if text[index] == UInt8(ascii: "-") { sign = -1 }
            index += 1
        }
        guard index < text.count else { return nil }
        var magnitude = 0
        while index < text.count {
            let digit = text[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            magnitude = min(magnitude * 10 + Int(digit), exponentLimit)
            index += 1
        }
        return sign * magnitude
    }

    /// The whole number, or nil for a fraction or a value outside Int64.
    var value: Int64? {
        guard let (first, last) = significant else { return 0 }
        guard scale >= 0 else { return nil }
        var magnitude: UInt64 = 0
        var digits = 0
        for index in first...last where text[index] != UInt8(ascii: ".") {
            digits += 1
            // At most 19 digits in all (with the zeros `scale` adds): below 10^19, in UInt64's
            // range; the range of Int64 is checked at the end.
            guard digits + scale <= 19 else { return nil }
            magnitude = magnitude * 10 + UInt64(text[index] &- UInt8(ascii: "0"))
        }
        for _ in 0..<scale { magnitude *= 10 }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }
}
