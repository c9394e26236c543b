/// A position in YAML source text: 1-based line and column (column counted in characters).
public struct YAMLPosition: Sendable, Hashable, CustomStringConvertible {
    /// 1-based line number.
    public var line: Int
    /// 1-based column, counted in Unicode characters as libyaml counts them.
    public var column: Int

    /// Creates a position from 1-based line and column numbers.
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// `line N, column M`.
    public var description: String { "line \(line), column \(column)" }
}

/// How a scalar was written. Only plain scalars are subject to type resolution (`null`, numbers,
/// booleans); every other style (single or double quoted, literal `|` or folded `>`) is a string.
public enum YAMLScalarStyle: Sendable, Hashable {
    /// Unquoted.
    case plain
    /// Single or double quoted, or a literal / folded block scalar.
    case quoted
}

/// One key/value pair of a YAML mapping, in document order.
public struct YAMLMappingEntry: Sendable, Equatable {
    /// The key node (always a scalar: complex keys are rejected by the parser).
    public var key: YAMLNode
    /// The value node.
    public var value: YAMLNode

    /// Creates an entry.
    public init(key: YAMLNode, value: YAMLNode) {
        self.key = key
        self.value = value
    }
}

/// A node of a parsed YAML document, with the position where it starts.
///
/// Anchors and aliases are rejected by ``YAMLParser`` (so a document cannot expand into a huge
/// tree), mapping keys are scalars and unique, and tags are ignored.
public indirect enum YAMLNode: Sendable, Equatable {
    /// A scalar: its text (without quotes, escapes resolved), how it was written, where it starts.
    case scalar(value: String, style: YAMLScalarStyle, position: YAMLPosition)
    /// A sequence of nodes in document order.
    case sequence([YAMLNode], position: YAMLPosition)
    /// A mapping with its entries in document order.
    case mapping([YAMLMappingEntry], position: YAMLPosition)

    /// Where the node starts.
    public var position: YAMLPosition {
        switch self {
        case .scalar(_, _, let position), .sequence(_, let position), .mapping(_, let position):
            position
        }
    }

    /// 1-based line where the node starts.
    public var line: Int { position.line }

    /// 1-based column where the node starts.
    public var column: Int { position.column }

    /// Whether this is a plain `null`, `Null`, `NULL`, `~` or empty scalar (YAML's null).
    public var isNull: Bool {
        guard case .scalar(let value, .plain, _) = self else { return false }
        switch value {
        case "", "~", "null", "Null", "NULL": return true
        default: return false
        }
    }

    /// The scalar's text, or nil for a sequence or mapping.
    public var scalarValue: String? {
        if case .scalar(let value, _, _) = self { return value }
        return nil
    }

    /// The value for a scalar key in a mapping (nil if not a mapping or the key is absent).
    public subscript(key: String) -> YAMLNode? {
        guard case .mapping(let entries, _) = self else { return nil }
        return entries.first { $0.key.scalarValue == key }?.value
    }
}
