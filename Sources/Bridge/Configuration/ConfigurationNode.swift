import Observability
import YAML

/// A YAML node being read as configuration: knows its key path (for errors), the environment
/// used for `${VAR}` expansion, and whether its value is secret (never echoed in errors).
struct ConfigurationNode {
    let node: YAMLNode
    let path: String
    let environment: [String: String]
    let isSecret: Bool

    init(node: YAMLNode, path: String, environment: [String: String], isSecret: Bool = false) {
        self.node = node
        self.path = path
        self.environment = environment
        self.isSecret = isSecret
    }

    func error(_ message: String) -> ConfigurationError {
        ConfigurationError(keyPath: path, message: message, line: node.line)
    }

    /// `got "abc"`, `got a mapping`…, never the text of a secret.
    func got(_ text: String? = nil) -> String {
        switch node {
        case .scalar(let raw, _, _):
            if isSecret { return "got a value that is not valid here" }
            if node.isNull { return "got null" }
            if Self.looksLikeKeyMaterial(text ?? raw) { return "got what looks like key material (not shown)" }
            return "got \"\(Self.shortened(text ?? raw))\""
        case .sequence: return "got a list"
        case .mapping: return "got a mapping"
        }
    }

    /// Whether `text` may be key material (a PEM block or its base64 lines, pasted or expanded
    /// from an environment variable where a path or a name belongs): such text is never repeated
    /// in an error.
    static func looksLikeKeyMaterial(_ text: String) -> Bool {
        // A PEM header, plain or base64-encoded (`LS0tLS1CRUdJTi` is `-----BEGIN`).
        if text.contains("-----BEGIN") || text.contains("PRIVATE KEY") || text.contains("LS0tLS1CRUdJTi") { return true }
        // Lines of a PEM body (a long run of base64 in text of several lines), or a key encoded
        // on one line (`base64 -w0`): a longer run, such as no path or name holds.
        let longest = text.contains(where: \.isNewline) ? 40 : 100
        var run = 0
        for byte in text.utf8 {
            let isBase64 = EnvironmentExpansion.isLetter(byte) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2B || byte == 0x2F || byte == 0x3D
            run = isBase64 ? run + 1 : 0
            if run >= longest { return true }
        }
        return false
    }

    static func shortened(_ text: String) -> String {
        text.count > 80 ? String(text.prefix(80)) + "…" : text
    }

    /// The scalar text with `${VAR}` / `${VAR:-default}` expanded.
    func scalarText(expected: String) throws(ConfigurationError) -> String {
        guard case .scalar(let raw, _, _) = node else { throw error("expected \(expected), \(got())") }
        return try EnvironmentExpansion.expand(raw, environment: environment, at: self)
    }

    /// A non-empty string.
    func string() throws(ConfigurationError) -> String {
        let text = try scalarText(expected: "a string")
        guard !text.isEmpty else { throw error("must not be empty") }
        return text
    }

    /// A non-empty string without control characters: a name that goes into logs, metric
    /// labels and the one-line reasons of the health endpoints.
    func name() throws(ConfigurationError) -> String {
        let text = try string()
        guard !text.unicodeScalars.contains(where: LogLineFormatter.needsEscape) else {
            throw error("must not contain control characters (a line break, a tab, a line separator…)")
        }
        return text
    }

    /// A string, or nil for null or an empty expansion.
    func optionalString() throws(ConfigurationError) -> String? {
        if node.isNull { return nil }
        let text = try scalarText(expected: "a string")
        return text.isEmpty ? nil : text
    }

    /// A file's path (a key, a certificate). Text with a line break or a PEM header is refused
    /// without being repeated: a key given inline (`key_file: "${APNS_KEY}"` holding the key
    /// itself) would otherwise be printed by the error that cannot open it, and by `check`.
    func filePath() throws(ConfigurationError) -> String {
        try checkedPath(string())
    }

    /// ``filePath()`` for a key that may be null or empty (nil then).
    func optionalFilePath() throws(ConfigurationError) -> String? {
        try optionalString().map { path throws(ConfigurationError) in try checkedPath(path) }
    }

    private func checkedPath(_ text: String) throws(ConfigurationError) -> String {
        guard !Self.looksLikeKeyMaterial(text), !text.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) else {
            throw error("must be a file's path, and holds text that looks like the key or certificate itself (not shown): "
                        + "put it in a file (a mounted secret) and give that file's path")
        }
        return text
    }

    /// An integer in `minimum...maximum`. Every count the bridge reads has a ceiling: a typo
    /// such as `connections: 20000` or `max_in_flight: 2000000000` would otherwise open
    /// thousands of sockets or admit more work than any host holds, instead of being refused.
    func integer(minimum: Int, maximum: Int) throws(ConfigurationError) -> Int {
        let expected = "an integer from \(minimum) to \(maximum)"
        let text = try scalarText(expected: expected)
        guard let value = Int(text), value >= minimum, value <= maximum else { throw error("expected \(expected), \(got(text))") }
        return value
    }

    /// `true` or `false`.
    func bool() throws(ConfigurationError) -> Bool {
        let text = try scalarText(expected: "true or false")
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: throw error("expected true or false, \(got(text))")
        }
    }

    /// The longest duration a configuration may give. The bridge turns durations into
    /// nanoseconds and adds them to clock readings: without a bound, `999999999999h` (which
    /// parses) would overflow that arithmetic and stop the process.
    static let maximumDuration = Duration.seconds(24 * 3600)

    /// A positive duration written `250ms`, `10s`, `5m` or `1h`, at most ``maximumDuration``
    /// and, when given, at least `minimum` (written as `minimumText` in the error).
    func duration(minimum: (value: Duration, text: String)? = nil) throws(ConfigurationError) -> Duration {
        let expected = "a positive duration such as 250ms, 10s, 5m or 1h"
        let text = try scalarText(expected: expected)
        guard let duration = DurationText.parse(text), duration > .zero else {
            throw error("expected \(expected), \(got(text))")
        }
        guard duration <= Self.maximumDuration else { throw error("expected a duration of at most 24h, \(got(text))") }
        if let minimum, duration < minimum.value {
            throw error("expected a duration of at least \(minimum.text), \(got(text))")
        }
        return duration
    }

    /// One of `allowed` (by its raw value).
    func choice<T: RawRepresentable>(_ allowed: [T]) throws(ConfigurationError) -> T where T.RawValue == String {
        let names = allowed.map(\.rawValue).joined(separator: ", ")
        let text = try scalarText(expected: "one of \(names)")
        guard let value = allowed.first(where: { $0.rawValue == text }) else {
            throw error("expected one of \(names), \(got(text))")
        }
        return value
    }

    /// A list of non-empty strings (a single string counts as a list of one).
    func stringList() throws(ConfigurationError) -> [String] {
        try list(of: "strings") { item throws(ConfigurationError) in try item.string() }
    }

    /// A list whose items `read` takes (a single scalar counts as a list of one).
    private func list(of items: String, _ read: (ConfigurationNode) throws(ConfigurationError) -> String) throws(ConfigurationError) -> [String] {
        switch node {
        case .scalar:
            return [try read(self)]
        case .sequence(let elements, _):
            var result: [String] = []
            for (index, element) in elements.enumerated() {
                result.append(try read(child(element, path: "\(path)[\(index)]")))
            }
            return result
        case .mapping:
            throw error("expected a list of \(items), \(got())")
        }
    }

    /// A Kafka topic name: 1 to 249 of `A-Z a-z 0-9 . _ -`. librdkafka would take a name
    /// starting with `^` as a pattern and subscribe to every matching topic, the bridge's own
    /// outputs included; the bridge reads named topics only.
    func topicName() throws(ConfigurationError) -> String {
        let text = try string()
        guard text.utf8.allSatisfy(Self.isNameByte), text.utf8.count <= 249, text != ".", text != ".." else {
            throw error("expected a topic name (at most 249 of A-Z a-z 0-9 . _ -; no patterns), \(got(text))")
        }
        return text
    }

    /// A list of topic names (a single name counts as a list of one), each named once:
    /// librdkafka refuses a subscription that names a topic twice.
    func topicNames() throws(ConfigurationError) -> [String] {
        let names = try list(of: "topic names") { item throws(ConfigurationError) in try item.topicName() }
        var seen = Set<String>()
        for (index, name) in names.enumerated() where !seen.insert(name).inserted {
            if case .sequence(let elements, _) = node {
                throw child(elements[index], path: "\(path)[\(index)]").error("the topic \"\(name)\" is already listed")
            }
        }
        return names
    }

    /// A mapping of string keys to scalar values (strings, numbers, booleans), all kept as text.
    /// Values under names that hold a secret (``BridgeConfiguration/isSecretKafkaProperty(_:)``)
    /// are never echoed in errors.
    func stringMap() throws(ConfigurationError) -> [String: String] {
        if node.isNull { return [:] }
        guard case .mapping(let entries, _) = node else { throw error("expected a mapping, \(got())") }
        var result: [String: String] = [:]
        for entry in entries {
            let key = entry.key.scalarValue ?? ""
            guard Self.shownKey(key) == key else {
                throw ConfigurationError(keyPath: "\(path).\(Self.shownKey(key))",
                                         message: "a property name is made of letters, digits, '.', '_' and '-' (a colon missing after the name?)",
                                         line: entry.key.line)
            }
            let value = child(entry.value, path: "\(path).\(key)", isSecret: BridgeConfiguration.isSecretKafkaProperty(key))
            guard case .scalar = entry.value, !entry.value.isNull else {
                throw value.error("expected a string, number or boolean, \(value.got())")
            }
            result[key] = try value.scalarText(expected: "a string, number or boolean")
        }
        return result
    }

    /// A mapping whose keys must all be in `allowed`. In a section with `secretKeys` (keys whose
    /// values are secrets), an unknown key is named only when it cannot be a piece of a secret:
    /// ``isNamedInASecretSection(key:value:allowed:)``, and not on the line of an unquoted secret
    /// written before it, since a comma in an unquoted flow-style value ends it
    /// (`{passphrase: hun, ter: 2}` has the key `ter`).
    func mapping(allowed: Set<String>, secretKeys: Set<String> = []) throws(ConfigurationError) -> ConfigurationMapping {
        var entries: [String: YAMLNode] = [:]
        if !node.isNull {
            guard case .mapping(let items, _) = node else { throw error("expected a mapping, \(got())") }
            var unquotedSecretLine: Int?
            for item in items {
                let key = item.key.scalarValue ?? ""
                guard allowed.contains(key) else {
                    guard secretKeys.isEmpty || (item.key.line != unquotedSecretLine
                                                 && Self.isNamedInASecretSection(key: key, value: item.value, allowed: allowed)) else {
                        throw ConfigurationError(keyPath: path, message: "unknown key (not shown, as it may be part of a secret; "
                            + "known: \(allowed.sorted().joined(separator: ", ")))", line: item.key.line)
                    }
                    let shown = Self.shownKey(key)
                    let keyPath = path.isEmpty ? shown : "\(path).\(shown)"
                    let message = shown == key ? "unknown key" : "unknown key (a colon missing after the name?)"
                    throw ConfigurationError(keyPath: keyPath, message: message, line: item.key.line)
                }
                if secretKeys.contains(key), case .scalar(_, .plain, _) = item.value { unquotedSecretLine = item.value.line }
                entries[key] = item.value
            }
        }
        return ConfigurationMapping(parent: self, entries: entries)
    }

    /// Whether an unknown key of a section that holds secrets may be named in its error: when it
    /// is a misspelling of a known one (`key_idd`), or a name with a value of its own
    /// (`color: blue`). A bare word is not: a secret written after its name without the colon
    /// makes a key without a value (`{passphrase,hunter2}`).
    static func isNamedInASecretSection(key: String, value: YAMLNode, allowed: Set<String>) -> Bool {
        if allowed.contains(where: { isMisspelling(key, of: $0) }) { return true }
        return !value.isNull && !key.isEmpty && key.utf8.allSatisfy(isNameByte)
    }

    /// Whether `byte` may be part of a key or a topic name: ASCII letters, digits, `.`, `_`, `-`.
    static func isNameByte(_ byte: UInt8) -> Bool {
        EnvironmentExpansion.isLetter(byte) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// A key as errors show it: up to its first byte that no key has (``isNameByte(_:)``). A key
    /// with another character is most likely a name and its value without the colon between them
    /// (`{passphrase hunter2}`, perhaps with a non-breaking space), and what follows the name may
    /// be a secret.
    static func shownKey(_ key: String) -> String {
        guard let cut = key.utf8.firstIndex(where: { !isNameByte($0) }) else { return key }
        return String(decoding: key.utf8[..<cut], as: UTF8.self) + "…"
    }

    /// Whether `key` is `known` with at most two letters added, dropped or changed, and made of
    /// the characters keys are made of.
    static func isMisspelling(_ key: String, of known: String) -> Bool {
        let typed = Array(key.utf8), target = Array(known.utf8)
        guard typed.allSatisfy(isNameByte), abs(typed.count - target.count) <= 2 else { return false }
        // Edit distance, one row at a time: `previous[j]` turns the typed bytes so far into `target[..<j]`.
        var previous = Array(0...target.count)
        for (row, byte) in typed.enumerated() {
            var current = [row + 1]
            for (column, expected) in target.enumerated() {
                current.append(min(previous[column + 1] + 1, current[column] + 1, previous[column] + (byte == expected ? 0 : 1)))
            }
            previous = current
        }
        return previous[target.count] <= 2
    }

    func child(_ node: YAMLNode, path: String, isSecret: Bool = false) -> ConfigurationNode {
        ConfigurationNode(node: node, path: path, environment: environment, isSecret: isSecret)
    }
}

/// The checked entries of one YAML mapping.
struct ConfigurationMapping {
    let parent: ConfigurationNode
    let entries: [String: YAMLNode]

    func keyPath(_ key: String) -> String {
        parent.path.isEmpty ? key : "\(parent.path).\(key)"
    }

    /// The value of `key`, or nil when absent or null (null means "use the default").
    func optional(_ key: String, isSecret: Bool = false) -> ConfigurationNode? {
        guard let node = entries[key], !node.isNull else { return nil }
        return parent.child(node, path: keyPath(key), isSecret: isSecret)
    }

    /// The value of `key`; absent or null is an error.
    func required(_ key: String) throws(ConfigurationError) -> ConfigurationNode {
        guard let value = optional(key) else {
            throw ConfigurationError(keyPath: keyPath(key), message: "required key is missing", line: parent.node.line)
        }
        return value
    }

    /// Whether `key` has a non-null value.
    func has(_ key: String) -> Bool { optional(key) != nil }
}
