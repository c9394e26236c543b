/// Why a byte sequence is not acceptable JSON, and where.
///
/// `line` and `column` are 1-based; `column` counts Unicode characters (scalars) from the start
/// of the line, so it matches what an editor shows. `byteOffset` is 0-based from the start of
/// the input.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class of problem.
    public enum Kind: Sendable, Equatable {
        /// The bytes break the JSON grammar (RFC 8259).
        case syntax
        /// The bytes are not well-formed UTF-8 (overlong forms, surrogates, truncated sequences…).
        case invalidUTF8
        /// Arrays and objects nest deeper than the configured limit.
        case tooDeep
        /// The input is longer than `JSONScanner.maximumInputBytes`.
        case tooLarge
    }

    /// The class of problem.
    public var kind: Kind
    /// 0-based offset of the offending byte.
    public var byteOffset: Int
    /// 1-based line of the offending byte.
    public var line: Int
    /// 1-based column (in characters) of the offending byte.
    public var column: Int
    /// What was wrong, e.g. `expected ',' or '}' but found 'x'`.
    public var message: String

    /// Creates an error.
    public init(kind: Kind, byteOffset: Int, line: Int, column: Int, message: String) {
        self.kind = kind
        self.byteOffset = byteOffset
        self.line = line
        self.column = column
        self.message = message
    }

    /// `invalid UTF-8 at byte N` for encoding errors, `line N, column M: message` otherwise.
    public var description: String {
        switch kind {
        case .invalidUTF8: "invalid UTF-8 at byte \(byteOffset)"
        case .syntax, .tooDeep: "line \(line), column \(column): \(message)"
        case .tooLarge: "too large: \(message)"
        }
    }
}
