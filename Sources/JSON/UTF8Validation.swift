/// Strict UTF-8 checks (RFC 3629): no overlong forms, no surrogates (U+D800–U+DFFF), nothing
/// above U+10FFFF, no truncated sequences.
public enum UTF8Validation {
    /// The length of the well-formed sequence starting at `index`, or nil if it is malformed.
    /// `bytes[index]` must be ≥ 0x80 (ASCII is handled by callers).
    @inline(__always)
    static func sequenceLength(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Int? {
        let lead = bytes[index]
        let remaining = bytes.count - index
        @inline(__always) func continuation(_ offset: Int) -> Bool {
            bytes[index + offset] & 0xC0 == 0x80
        }
        switch lead {
        case 0xC2...0xDF:
            guard remaining >= 2, continuation(1) else { return nil }
            return 2
        case 0xE0...0xEF:
            guard remaining >= 3 else { return nil }
            let second = bytes[index + 1]
            switch lead {
            case 0xE0: guard (0xA0...0xBF).contains(second) else { return nil }   // overlong
            case 0xED: guard (0x80...0x9F).contains(second) else { return nil }   // surrogates
            default: guard second & 0xC0 == 0x80 else { return nil }
            }
            guard continuation(2) else { return nil }
            return 3
        case 0xF0...0xF4:
            guard remaining >= 4 else { return nil }
            let second = bytes[index + 1]
            switch lead {
            case 0xF0: guard (0x90...0xBF).contains(second) else { return nil }   // overlong
            case 0xF4: guard (0x80...0x8F).contains(second) else { return nil }   // > U+10FFFF
            default: guard second & 0xC0 == 0x80 else { return nil }
            }
            guard continuation(2), continuation(3) else { return nil }
            return 4
        default:
            return nil  // continuation byte as lead, C0/C1 (overlong), F5…FF
        }
    }

    /// The offset of the first malformed byte of `bytes`, or nil if all of it is valid UTF-8.
    static func firstInvalidOffset(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var index = 0
        while index < bytes.count {
            if bytes[index] < 0x80 {
                index += 1
            } else if let length = sequenceLength(bytes, at: index) {
                index += length
            } else {
                return index
            }
        }
        return nil
    }

    /// Whether `bytes` is entirely well-formed UTF-8.
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { firstInvalidOffset($0) == nil }
    }
}
