/// A view of one value inside a ``JSONDocument``.
public struct JSONValue: Sendable {
    @usableFromInline let document: JSONDocument
    let index: Int

    @usableFromInline var node: JSONNode { document.nodes[index] }

    /// This value's place in its document. A caller keeping many values of one document (the
    /// fields of a request) can keep one `JSONValue` and plain positions, instead of a `JSONValue`
    /// each, every one of which holds a reference to the document.
    public var position: Int { index }

    /// The value at `position` (a ``position`` read from a value of the same document).
    public func value(atPosition position: Int) -> JSONValue {
        precondition(position >= 0 && position < document.nodes.count, "JSON position out of range")
        return JSONValue(document: document, index: position)
    }

    /// What kind of value this is.
    public var kind: JSONKind {
        switch node.tag {
        case .object: .object
        case .array: .array
        case .string: .string
        case .number: .number
        case .trueValue, .falseValue: .boolean
        case .null: .null
        }
    }

    /// Byte range of the value in ``JSONDocument/bytes`` (a string's range includes its quotes).
    public var rawRange: Range<Int> { node.start..<node.end }

    /// The value's exact input bytes (shares storage with the document).
    public var rawBytes: ArraySlice<UInt8> { document.bytes[rawRange] }

    /// Number of members of an object or elements of an array; 0 for other values.
    public var count: Int { node.count }

    /// Whether the value is `null`.
    public var isNull: Bool { node.tag == .null }

    /// The boolean, or nil if the value is not `true` / `false`.
    public var boolValue: Bool? {
        switch node.tag {
        case .trueValue: true
        case .falseValue: false
        default: nil
        }
    }

    /// The decoded string (escapes resolved, surrogate pairs combined), or nil if not a string.
    public var stringValue: String? {
        let node = self.node
        guard node.tag == .string else { return nil }
        let contentStart = node.start + 1
        let contentEnd = node.end - 1
        if !node.hasEscapes {
            return document.bytes.withUnsafeBufferPointer { buffer in
                String(decoding: UnsafeBufferPointer(rebasing: buffer[contentStart..<contentEnd]), as: UTF8.self)
            }
        }
        return document.bytes.withUnsafeBufferPointer { buffer in
            JSONStringDecoding.decodeEscaped(UnsafeBufferPointer(rebasing: buffer[contentStart..<contentEnd]))
        }
    }

    /// Calls `body` with a string's UTF-8 bytes, without quotes and without making a `String`,
    /// when the string has no escapes; nil for other values and for strings with escapes (read
    /// those with ``stringValue``). Inlinable, so that callers in other modules get it
    /// specialized (key matching calls it for every member of every request).
    @inlinable
    public func withUnescapedUTF8<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result? {
        let node = self.node
        guard node.tag == .string, !node.hasEscapes else { return nil }
        return document.bytes.withUnsafeBufferPointer { buffer in
            body(UnsafeBufferPointer(rebasing: buffer[(node.start + 1)..<(node.end - 1)]))
        }
    }

    /// The number as an Int64 when it is written as an integer (no fraction or exponent) that
    /// fits; nil otherwise (including for non-numbers).
    public var int64Value: Int64? {
        let node = self.node
        guard node.tag == .number else { return nil }
        return document.bytes.withUnsafeBufferPointer { buffer -> Int64? in
            var index = node.start
            var negative = false
            if buffer[index] == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            var magnitude: UInt64 = 0
            while index < node.end {
                let byte = buffer[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                magnitude = sum
                index += 1
            }
            if negative {
                guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
                return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
            }
            guard magnitude <= UInt64(Int64.max) else { return nil }
            return Int64(magnitude)
        }
    }

    /// The number's source text (e.g. `-1.5e3`), or nil if not a number.
    public var numberText: String? {
        guard node.tag == .number else { return nil }
        return String(decoding: rawBytes, as: UTF8.self)
    }

    /// The elements of an array, in order (empty for other values).
    public var elements: JSONElements { JSONElements(value: self) }

    /// The members of an object, in document order, duplicates included (empty for other values).
    public var members: JSONMembers { JSONMembers(value: self) }

    /// The value of the first member named `key`, or nil (also for non-objects).
    public subscript(key: String) -> JSONValue? {
        for member in members where member.key.stringValue == key {
            return member.value
        }
        return nil
    }
}

/// The elements of a JSON array, walked along the document's tape.
public struct JSONElements: Sequence, Sendable {
    let value: JSONValue

    /// Iterates the elements in order.
    public struct Iterator: IteratorProtocol {
        let document: JSONDocument
        var position: Int
        var remaining: Int

        /// The next element, or nil.
        public mutating func next() -> JSONValue? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            let element = JSONValue(document: document, index: position)
            position = document.nodes[position].next
            return element
        }
    }

    /// Starts an iteration.
    public func makeIterator() -> Iterator {
        let isArray = value.node.tag == .array
        return Iterator(document: value.document, position: value.index + 1, remaining: isArray ? value.node.count : 0)
    }
}

/// The members (key, value) of a JSON object, walked along the document's tape.
public struct JSONMembers: Sequence, Sendable {
    let value: JSONValue

    /// Iterates the members in document order.
    public struct Iterator: IteratorProtocol {
        let document: JSONDocument
        var position: Int
        var remaining: Int

        /// The next member, or nil.
        public mutating func next() -> (key: JSONValue, value: JSONValue)? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            let key = JSONValue(document: document, index: position)
            let valueIndex = document.nodes[position].next
            position = document.nodes[valueIndex].next
            return (key, JSONValue(document: document, index: valueIndex))
        }
    }

    /// Starts an iteration.
    public func makeIterator() -> Iterator {
        let isObject = value.node.tag == .object
        return Iterator(document: value.document, position: value.index + 1, remaining: isObject ? value.node.count : 0)
    }
}
