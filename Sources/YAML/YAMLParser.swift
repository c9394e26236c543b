import CYAML

/// Parses YAML text into a ``YAMLNode`` tree with libyaml's event API.
///
/// Supported: one document of scalars, sequences and mappings (block or flow style).
/// Rejected with a ``YAMLError``: syntax errors, anchors and aliases (`&a`, `*a`; rejecting them
/// keeps a small file from expanding into a huge tree), complex (non-scalar) mapping keys,
/// duplicate mapping keys, more than one document, and nesting deeper than ``maximumDepth``.
/// Tags are ignored.
public enum YAMLParser {
    /// The deepest nesting of sequences and mappings accepted.
    public static let maximumDepth = 256

    /// Parses `text`; returns nil when the stream holds no document (empty or only comments).
    public static func parse(_ text: String) throws(YAMLError) -> YAMLNode? {
        let bytes = Array(text.utf8)
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) == 1 else {
            throw YAMLError(line: 1, column: 1, problem: "cannot initialize the YAML parser")
        }
        defer { yaml_parser_delete(parser) }
        let result: Result<YAMLNode?, YAMLError> = bytes.withUnsafeBufferPointer { buffer in
            // libyaml needs a non-null pointer even for empty input.
            let empty: [UInt8] = [0]
            return empty.withUnsafeBufferPointer { fallback in
                let base = buffer.baseAddress ?? fallback.baseAddress
                yaml_parser_set_input_string(parser, base, buffer.count)
                var builder = YAMLTreeBuilder()
                do throws(YAMLError) {
                    return .success(try builder.run(parser))
                } catch {
                    return .failure(error)
                }
            }
        }
        return try result.get()
    }
}

/// Turns the event stream into a tree with an explicit stack (no recursion on hostile nesting).
struct YAMLTreeBuilder {
    /// An open sequence or mapping. Appended to in place through `stack`'s last element, so
    /// that a long list or mapping is built in linear time (taking a frame out of the stack to
    /// append would copy its elements every time).
    struct Frame {
        let isMapping: Bool
        let start: YAMLPosition
        var items: [YAMLNode] = []
        var entries: [YAMLMappingEntry] = []
        var pendingKey: YAMLNode?
        /// Each key of a mapping and where it first appeared.
        var seenKeys: [String: YAMLPosition] = [:]

        static func sequence(_ start: YAMLPosition) -> Frame { Frame(isMapping: false, start: start) }
        static func mapping(_ start: YAMLPosition) -> Frame { Frame(isMapping: true, start: start) }
    }

    var stack: [Frame] = []
    var root: YAMLNode?
    var documents = 0

    mutating func run(_ parser: UnsafeMutablePointer<yaml_parser_t>) throws(YAMLError) -> YAMLNode? {
        var event = yaml_event_t()
        while true {
            guard yaml_parser_parse(parser, &event) == 1 else {
                throw Self.parserError(parser.pointee)
            }
            defer { yaml_event_delete(&event) }
            let position = YAMLPosition(
                line: Int(event.start_mark.line) + 1, column: Int(event.start_mark.column) + 1)
            switch event.type {
            case YAML_STREAM_END_EVENT:
                return root
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
                if documents > 1 {
                    throw YAMLError(line: position.line, column: position.column,
                                    problem: "more than one document is not supported")
                }
            case YAML_ALIAS_EVENT:
                throw YAMLError(line: position.line, column: position.column,
                                problem: "aliases (*name) are not supported")
            case YAML_SCALAR_EVENT:
                let scalar = event.data.scalar
                if scalar.anchor != nil { throw Self.anchorError(position) }
                let value: String
                if let pointer = scalar.value {
                    value = String(decoding: UnsafeBufferPointer(start: pointer, count: scalar.length), as: UTF8.self)
                } else {
                    value = ""
                }
                let style: YAMLScalarStyle = scalar.style == YAML_PLAIN_SCALAR_STYLE ? .plain : .quoted
                if style == .plain, event.end_mark.line > event.start_mark.line {
                    // Almost always a key whose colon was left out (`passphrase hunter2` under
                    // `cert_file: x` reads as `cert_file: "x passphrase hunter2"`): refused, and
                    // not echoed, since what follows the missing colon may be a secret.
                    throw YAMLError(line: position.line, column: position.column,
                                    problem: "an unquoted value goes on over the next line (a colon missing there?); quote a value that spans lines")
                }
                try attach(.scalar(value: value, style: style, position: position))
            case YAML_SEQUENCE_START_EVENT:
                if event.data.sequence_start.anchor != nil { throw Self.anchorError(position) }
                try push(.sequence(position), at: position)
            case YAML_MAPPING_START_EVENT:
                if event.data.mapping_start.anchor != nil { throw Self.anchorError(position) }
                try push(.mapping(position), at: position)
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let frame = stack.popLast() else {
                    throw YAMLError(line: position.line, column: position.column, problem: "unbalanced collection end")
                }
                try attach(frame.isMapping ? .mapping(frame.entries, position: frame.start)
                                           : .sequence(frame.items, position: frame.start))
            default:
                break  // stream start, document end, no event
            }
        }
    }

    mutating func push(_ frame: Frame, at position: YAMLPosition) throws(YAMLError) {
        guard stack.count < YAMLParser.maximumDepth else {
            throw YAMLError(line: position.line, column: position.column,
                            problem: "nesting deeper than \(YAMLParser.maximumDepth) levels")
        }
        stack.append(frame)
    }

    mutating func attach(_ node: YAMLNode) throws(YAMLError) {
        guard !stack.isEmpty else {
            root = node
            return
        }
        let top = stack.count - 1
        guard stack[top].isMapping else {
            stack[top].items.append(node)
            return
        }
        if let key = stack[top].pendingKey {
            stack[top].entries.append(YAMLMappingEntry(key: key, value: node))
            stack[top].pendingKey = nil
            return
        }
        guard case .scalar(let text, _, let position) = node else {
            throw YAMLError(line: node.line, column: node.column,
                            problem: "complex (non-scalar) mapping keys are not supported")
        }
        if let first = stack[top].seenKeys[text] {
            // Not quoted: a key can be a secret written in the wrong place, and the two
            // positions find it as surely.
            throw YAMLError(line: position.line, column: position.column,
                            problem: "duplicate mapping key (the same key as at line \(first.line), column \(first.column))")
        }
        stack[top].seenKeys[text] = position
        stack[top].pendingKey = node
    }

    static func anchorError(_ position: YAMLPosition) -> YAMLError {
        YAMLError(line: position.line, column: position.column, problem: "anchors (&name) are not supported")
    }

    static func parserError(_ parser: yaml_parser_t) -> YAMLError {
        var problem = parser.problem.map { String(cString: $0) } ?? "invalid YAML"
        if let context = parser.context.map({ String(cString: $0) }) {
            problem += " (\(context), line \(parser.context_mark.line + 1))"
        }
        if parser.error == YAML_READER_ERROR, let start = parser.input.string.start, let end = parser.input.string.end {
            // The reader (a control character, invalid UTF-8) reports a byte offset, not a mark.
            let position = position(ofByte: Int(parser.problem_offset), in: UnsafeBufferPointer(start: start, count: end - start))
            return YAMLError(line: position.line, column: position.column, problem: problem)
        }
        return YAMLError(line: Int(parser.problem_mark.line) + 1,
                         column: Int(parser.problem_mark.column) + 1, problem: problem)
    }

    /// The line and column (both from 1; the column counts bytes) of byte `offset` in `text`.
    static func position(ofByte offset: Int, in text: UnsafeBufferPointer<UInt8>) -> YAMLPosition {
        var line = 1
        var column = 1
        for byte in text.prefix(max(0, offset)) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return YAMLPosition(line: line, column: column)
    }
}
