/// `${VAR}` and `${VAR:-default}` substitution in configuration values.
///
/// `${VAR}` must be set (an unset variable is an error naming the key and the variable);
/// `${VAR:-default}` uses `default` when VAR is unset or empty, as the shell does. A `$` not
/// followed by `{` is kept as is. Variable names are `[A-Za-z_][A-Za-z0-9_]*`. A default is
/// plain text: one holding `${` (a nested reference, which the shell would expand) is an error
/// rather than text taken up to the first `}`.
///
/// A variable whose value is not UTF-8 (``BridgeConfiguration/notUTF8EnvironmentValue``) is an
/// error naming it, never text with its bytes replaced.
///
/// The errors of a secret value (a passphrase, a librdkafka password) name the key only: the
/// text between `${` and `}` is part of the secret when the reference is mistyped.
enum EnvironmentExpansion {
    static func expand(_ text: String, environment: [String: String], at node: ConfigurationNode) throws(ConfigurationError) -> String {
        guard text.contains("${") else { return text }
        var output = ""
        var rest = Substring(text)
        while let dollar = firstRange(of: "${", in: rest) {
            output += rest[..<dollar.lowerBound]
            let afterOpen = rest[dollar.upperBound...]
            guard let close = afterOpen.firstIndex(of: "}") else {
                throw node.error("unterminated ${ in value")
            }
            let body = afterOpen[..<close]
            let name: Substring
            let fallback: Substring?
            if let separator = firstRange(of: ":-", in: body) {
                name = body[..<separator.lowerBound]
                fallback = body[separator.upperBound...]
                if let fallback, firstRange(of: "${", in: fallback) != nil {
                    throw node.error(node.isSecret ? "a nested ${…} in a secret value's default is not supported"
                                                   : "a nested ${…} in the default of ${\(name):-…} is not supported")
                }
            } else {
                name = body
                fallback = nil
            }
            guard isValidName(name) else {
                throw node.error(node.isSecret ? "invalid ${…} reference in a secret value"
                                               : "invalid environment variable name \"\(name)\" in ${…}")
            }
            let value = environment[String(name)]
            if value == BridgeConfiguration.notUTF8EnvironmentValue {
                throw node.error(node.isSecret ? "a ${…} reference in a secret value names an environment variable that is not valid UTF-8"
                                               : "environment variable \(name) is not valid UTF-8")
            }
            if let fallback {
                output += (value?.isEmpty ?? true) ? String(fallback) : value ?? ""
            } else if let value {
                output += value
            } else {
                throw node.error(node.isSecret ? "a ${…} reference in a secret value names an environment variable that is not set"
                                               : "environment variable \(name) is not set")
            }
            rest = afterOpen[afterOpen.index(after: close)...]
        }
        output += rest
        return output
    }

    /// The range of the first occurrence of a two-character ASCII `marker` in `text`.
    static func firstRange(of marker: String, in text: Substring) -> Range<Substring.Index>? {
        let markerBytes = Array(marker.utf8)
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(after: index)
            if text[index].utf8.elementsEqual(markerBytes.prefix(1)), next < text.endIndex,
               text[next].utf8.elementsEqual(markerBytes.dropFirst()) {
                return index..<text.index(after: next)
            }
            index = next
        }
        return nil
    }

    static func isValidName(_ name: Substring) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || isLetter(first) else { return false }
        return name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) }
    }

    static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }
}

/// Durations written `250ms`, `10s`, `5m` or `1h`.
public enum DurationText {
    /// Parses a duration, or returns nil when the text is not a whole number followed by a unit.
    public static func parse(_ text: String) -> Duration? {
        let units: [(suffix: String, milliseconds: Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
        for unit in units where text.hasSuffix(unit.suffix) {
            let digits = text.dropLast(unit.suffix.count)
            guard !digits.isEmpty, digits.count <= 12, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let number = Int64(digits) else { return nil }
            return .milliseconds(number * unit.milliseconds)
        }
        return nil
    }
}
