import JSON
import Observability
/// The top-level fields of a request object, each found at most once.
///
/// Kept as positions in the document next to its root: a `JSONValue` per field held a reference
/// to the document each, retained and released whenever the fields were copied or read.
struct RequestFields {
    private let root: JSONValue
    /// Position of each field's value by `RequestField.rawValue`; -1 when absent (or null).
    private var positions: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) =
        (-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1)

    var id: JSONValue? { value(.id) }
    var app: JSONValue? { value(.app) }
    var tokens: JSONValue? { value(.tokens) }
    var token: JSONValue? { value(.token) }
    var payload: JSONValue? { value(.payload) }
    var pushType: JSONValue? { value(.pushType) }
    var priority: JSONValue? { value(.priority) }
    var expiration: JSONValue? { value(.expiration) }
    var collapseID: JSONValue? { value(.collapseID) }
    var topic: JSONValue? { value(.topic) }
    var environment: JSONValue? { value(.environment) }
    var apnsID: JSONValue? { value(.apnsID) }

    /// One pass over the members; unknown fields are ignored, known ones must be unique; null = absent.
    init(root: JSONValue) throws(DeadLetter) {
        self.root = root
        guard root.kind == .object else {
            throw DeadLetter(code: .invalidRequest, detail: "the request must be a JSON object")
        }
        for (keyValue, value) in root.members {
            // Keys are matched on their bytes; only a key written with escapes is decoded first.
            let field: RequestField?
            switch keyValue.withUnescapedUTF8(RequestField.init(utf8:)) {
            case .some(let matched): field = matched
            case .none: field = keyValue.stringValue.flatMap(RequestField.init(name:))  // invariant of the scanner: keys are strings
            }
            guard let field else { continue }
            let bit: UInt16 = 1 << UInt16(field.rawValue)
            guard seenNull & bit == 0, fill(field, with: value.isNull ? nil : value) else {
                throw DeadLetter(code: .invalidRequest, detail: "field \"\(field.name)\": appears more than once")
            }
            if value.isNull { seenNull |= bit }
        }
    }

    /// Puts `value` (nil: a JSON null, which only marks the field as seen) in `field`'s slot;
    /// false when the slot is already taken.
    private mutating func fill(_ field: RequestField, with value: JSONValue?) -> Bool {
        let position = value?.position ?? -1
        return withUnsafeMutableBytes(of: &positions) { raw in
            let slots = raw.bindMemory(to: Int.self)
            guard slots[field.rawValue] < 0 else { return false }
            slots[field.rawValue] = position
            return true
        }
    }

    private func value(_ field: RequestField) -> JSONValue? {
        let position = withUnsafeBytes(of: positions) { $0.load(fromByteOffset: field.rawValue * MemoryLayout<Int>.stride, as: Int.self) }
        return position < 0 ? nil : root.value(atPosition: position)
    }

    /// Fields seen as JSON null, one bit per `RequestField.rawValue`.
    private var seenNull: UInt16 = 0
}

/// The known top-level fields of a request; `rawValue` indexes `names`.
enum RequestField: Int {
    case id, app, tokens, token, payload, topic, environment, pushType, priority, expiration, collapseID, apnsID

    /// The JSON names, in case order.
    static let names: [[UInt8]] = [
        "id", "app", "tokens", "token", "payload", "topic", "environment", "push_type", "priority", "expiration",
        "collapse_id", "apns_id",
    ].map { Array($0.utf8) }

    var name: String { String(decoding: Self.names[rawValue], as: UTF8.self) }

    /// The field named by `bytes`: chosen by length, then compared with that length's one or
    /// two names (no loop over every name).
    init?(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        let field: RequestField? = switch bytes.count {
        case 2: Self.match(bytes, "id", .id)
        case 3: Self.match(bytes, "app", .app)
        case 5: Self.match(bytes, "token", .token) ?? Self.match(bytes, "topic", .topic)
        case 6: Self.match(bytes, "tokens", .tokens)
        case 7: Self.match(bytes, "payload", .payload) ?? Self.match(bytes, "apns_id", .apnsID)
        case 8: Self.match(bytes, "priority", .priority)
        case 9: Self.match(bytes, "push_type", .pushType)
        case 10: Self.match(bytes, "expiration", .expiration)
        case 11: Self.match(bytes, "environment", .environment) ?? Self.match(bytes, "collapse_id", .collapseID)
        default: nil
        }
        guard let field else { return nil }
        self = field
    }

    /// `field` when `bytes` spell `name`.
    private static func match(_ bytes: UnsafeBufferPointer<UInt8>, _ name: StaticString, _ field: RequestField) -> RequestField? {
        ByteScan.equals(bytes, name) ? field : nil
    }

    init?(name: String) {
        guard let field = name.withUTF8Bytes({ RequestField(utf8: $0) }) else { return nil }
        self = field
    }
}

extension PushRequestDecoder {
    /// Distinct valid (lower-cased) and invalid token strings, in first-seen order.
    struct DecodedTokens {
        var valid: [String] = []
        var invalid: [String] = []
    }

    func decodeTokens(token: JSONValue?, tokens: JSONValue?) throws(DeadLetter) -> DecodedTokens {
        var result = DecodedTokens()
        switch (token, tokens) {
        case (nil, nil):
            throw DeadLetter(code: .invalidRequest, detail: "field \"tokens\": one of \"tokens\" or \"token\" is required")
        case (.some, .some):
            throw DeadLetter(code: .invalidRequest, detail: "field \"token\": give either \"token\" or \"tokens\", not both")
        case (let single?, nil):
            guard let text = single.stringValue else { throw invalid("token", "must be a string") }
            if let normalized = Self.normalizedToken(text) {
                result.valid.append(normalized)
            } else {
                result.invalid.append(text)
            }
        case (nil, let list?):
            guard list.kind == .array else { throw invalid("tokens", "must be an array of strings") }
            guard list.count > 0 else { throw invalid("tokens", "must not be empty") }
            guard list.count <= maxTokensPerRequest else {
                throw DeadLetter(code: .tooManyTokens,
                                 detail: "field \"tokens\": \(list.count) tokens, at most \(maxTokensPerRequest) are allowed")
            }
            // Duplicates are dropped: by comparing with the few kept so far in short lists (most
            // requests have one token), through sets in long ones.
            let usesSets = list.count > Self.linearDuplicateCheckLimit
            var seenValid = usesSets ? Set<String>(minimumCapacity: list.count) : []
            var seenInvalid = Set<String>()
            result.valid.reserveCapacity(list.count)
            for (index, element) in list.elements.enumerated() {
                guard let text = element.stringValue else { throw invalid("tokens[\(index)]", "must be a string") }
                if let normalized = Self.normalizedToken(text) {
                    let isNew = usesSets ? seenValid.insert(normalized).inserted : !result.valid.contains(normalized)
                    if isNew { result.valid.append(normalized) }
                } else if usesSets ? seenInvalid.insert(text).inserted : !result.invalid.contains(text) {
                    result.invalid.append(text)
                }
            }
        }
        return result
    }

    /// Token lists up to this long are checked for duplicates by comparison, longer ones by hashing.
    static let linearDuplicateCheckLimit = 8

    /// The lower-cased token if it is an even number (64–200) of hex digits, else nil.
    static func normalizedToken(_ text: String) -> String? {
        guard let classes = text.withUTF8Bytes(tokenClasses), classes & TokenByteClass.other == 0 else { return nil }
        return classes & TokenByteClass.upperHex != 0 ? lowercasedASCII(text) : text
    }

    /// `normalizedToken` of the string these UTF-8 bytes spell, made from the bytes.
    static func normalizedToken(utf8 bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard let classes = tokenClasses(bytes), classes & TokenByteClass.other == 0 else { return nil }
        guard classes & TokenByteClass.upperHex != 0 else { return String(decoding: bytes, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: bytes.count) { target in
            for (offset, byte) in bytes.enumerated() { target[offset] = byte | 0x20 }  // hex digits only: a no-op on 0-9 and a-f
            return bytes.count
        }
    }

    /// The `TokenByteClass` bits of a token's bytes, or nil when its length is not an even number
    /// from 64 to 200. One table load and one OR per byte, no branch.
    static func tokenClasses(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt8? {
        guard bytes.count >= 64, bytes.count <= 200, bytes.count % 2 == 0 else { return nil }
        return tokenByteClasses.withUnsafeBufferPointer { table in
            var classes: UInt8 = 0
            for byte in bytes { classes |= table[Int(byte)] }
            return classes
        }
    }

    /// Bits of `tokenByteClasses`.
    enum TokenByteClass {
        static let lowerHex: UInt8 = 1
        static let upperHex: UInt8 = 2
        static let other: UInt8 = 4
    }

    /// The class of each byte value in a device token: a digit or `a`–`f`, `A`–`F`, or anything else.
    static let tokenByteClasses: [UInt8] = (0...255).map { byte -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): TokenByteClass.lowerHex
        case UInt8(ascii: "A")...UInt8(ascii: "F"): TokenByteClass.upperHex
        default: TokenByteClass.other
        }
    }

    /// The lower-cased canonical form of an 8-4-4-4-12 hex UUID, or nil.
    static func canonicalUUID(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return nil }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
            } else {
                guard isHexDigit(byte) else { return nil }
            }
        }
        return lowercasedASCII(text)
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }

    static func lowercasedASCII(_ text: String) -> String {
        String(decoding: text.utf8.map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }
}
