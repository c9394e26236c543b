/// The kind of a JSON value.
public enum JSONKind: Sendable, Equatable {
    /// The six JSON value types (`true` and `false` are both `boolean`).
    case object, array, string, number, boolean, null
}

/// One value of a parsed document, stored flat ("tape") in document order.
///
/// Containers are followed by their children; `next` is the tape index just past the value's
/// subtree, so siblings are reached without recursion. Object children alternate key, value.
///
/// Positions are stored in 32 bits (inputs are limited to `JSONScanner.maximumInputBytes`), so
/// a node takes 20 bytes: the tape of a push request stays a small allocation.
@usableFromInline
struct JSONNode: Sendable {
    @usableFromInline
    enum Tag: UInt8, Sendable { case object, array, string, number, trueValue, falseValue, null }

    @usableFromInline var tag: Tag
    /// For strings: whether the raw text holds backslash escapes (decoding needs more than a copy).
    @usableFromInline var hasEscapes: Bool
    private var storedStart: UInt32
    private var storedEnd: UInt32
    private var storedNext: UInt32
    private var storedCount: UInt32

    init(tag: Tag, hasEscapes: Bool, start: Int, end: Int, next: Int, count: Int) {
        self.tag = tag
        self.hasEscapes = hasEscapes
        storedStart = UInt32(truncatingIfNeeded: start)
        storedEnd = UInt32(truncatingIfNeeded: end)
        storedNext = UInt32(truncatingIfNeeded: next)
        storedCount = UInt32(truncatingIfNeeded: count)
    }

    /// Raw bytes of the value: `start..<end` (strings include their quotes).
    @usableFromInline var start: Int { Int(storedStart) }
    @usableFromInline var end: Int {
        get { Int(storedEnd) }
        set { storedEnd = UInt32(truncatingIfNeeded: newValue) }
    }
    /// Tape index after this value's subtree.
    var next: Int {
        get { Int(storedNext) }
        set { storedNext = UInt32(truncatingIfNeeded: newValue) }
    }
    /// Members of an object or elements of an array; 0 otherwise.
    var count: Int {
        get { Int(storedCount) }
        set { storedCount = UInt32(truncatingIfNeeded: newValue) }
    }
}

/// A parsed, validated JSON text: the input bytes plus a flat index of every value's raw range.
///
/// Values are not materialised: strings are decoded and numbers converted only when asked
/// (``JSONValue/stringValue``, ``JSONValue/int64Value``), and any value's exact input bytes are
/// available as ``JSONValue/rawBytes`` so that a sub-object can be forwarded byte for byte.
///
/// The bytes and the tape live in one object, so each ``JSONValue`` (which carries its document)
/// holds one reference, not two: walking a document copies values often.
public struct JSONDocument: Sendable {
    private final class Storage: Sendable {
        let bytes: [UInt8]
        let nodes: [JSONNode]

        init(bytes: [UInt8], nodes: [JSONNode]) {
            self.bytes = bytes
            self.nodes = nodes
        }
    }

    private let storage: Storage

    /// The input the document was parsed from.
    public var bytes: [UInt8] { storage.bytes }
    var nodes: [JSONNode] { storage.nodes }

    init(bytes: [UInt8], nodes: [JSONNode]) {
        storage = Storage(bytes: bytes, nodes: nodes)
    }

    /// The top-level value.
    public var root: JSONValue { JSONValue(document: self, index: 0) }
}
