import Observability

/// A configuration problem, naming the key (`apps[1].auth.key_id`) and, when known, the line.
///
/// Messages never contain secret values (passphrases), nor control characters: what a key or
/// value brings along (an escape sequence, a line break) is escaped as in log lines.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Full path of the offending key, e.g. `limits.max_in_flight`; empty for the file as a whole.
    public var keyPath: String
    /// What is wrong, e.g. `expected a positive integer, got "abc"`.
    public var message: String
    /// 1-based line in the YAML file, when known.
    public var line: Int?

    /// Creates an error.
    public init(keyPath: String, message: String, line: Int? = nil) {
        self.keyPath = LogLineFormatter.escapingControlCharacters(keyPath)
        self.message = LogLineFormatter.escapingControlCharacters(message)
        self.line = line
    }

    /// `keyPath: message (line N)`.
    public var description: String {
        let location = line.map { " (line \($0))" } ?? ""
        return keyPath.isEmpty ? "\(message)\(location)" : "\(keyPath): \(message)\(location)"
    }
}
