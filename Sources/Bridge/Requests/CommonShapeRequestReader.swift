import APNs
import JSON
import Observability

/// The decoder's fast path: a request of the shape producers nearly always send, read in one
/// pass over the record's bytes, without a tape, a `JSONValue` per field or a copy of the record.
///
/// It takes: top-level member names without escapes, each known one at most once; `id`, `app`,
/// the tokens, `push_type`, `collapse_id`, `topic`, `environment` and `apns_id` as ASCII
/// strings without escapes or control characters; one to `linearDuplicateCheckLimit`
/// well-formed tokens; `priority` and `expiration` as plain non-negative integers; every value in
/// range. Anything else (a JSON null, an escape or a non-ASCII byte in those strings, a malformed
/// token, a value out of range, any syntax error) makes it throw `NotCommonShape`, and the
/// general path decodes the record: the fast path never decides a dead letter, and a request it
/// returns is the one the general path returns for the same bytes
/// (`CommonShapeRequestReaderTests` and the push-request fuzz target compare the two). The payload and unknown members are checked by
/// the JSON scanner, without a tape.
struct CommonShapeRequestReader {
    /// The bytes are not of the common shape: the general path decodes them.
    struct NotCommonShape: Error {}

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var members = Members()

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// What the member walk finds: where each string's text is (without its quotes), the payload
    /// object, the integers, and where the `tokens` array starts with how many strings it holds
    /// and where the first one is.
    private struct Members {
        var id, app, token, topic, environment, pushType, collapseID, apnsID: Range<Int>?
        var payload: Range<Int>?
        var priority, expiration: Int64?
        var tokenList: (start: Int, count: Int, first: Range<Int>)?
    }

    /// The request these bytes hold.
    /// - Throws: `NotCommonShape` when they are not of the common shape (the general path decides).
    mutating func read(with decoder: PushRequestDecoder, source: RecordSource) throws(NotCommonShape) -> PushRequest {
        guard bytes.count <= JSONScanner.maximumInputBytes, readMembers(),
              let app = app(members.app, decoder), let payload = members.payload,
              let tokens = tokens(limit: decoder.maxTokensPerRequest) else { throw NotCommonShape() }

        var pushType = PushType.alert
        if let range = members.pushType {
            guard let type = PushType(rawValue: text(range)) else { throw NotCommonShape() }
            pushType = type
        }
        guard payload.count <= pushType.maximumPayloadBytes else { throw NotCommonShape() }
        var priority = pushType.defaultPriority
        if let given = members.priority {
            guard PushRequestDecoder.isPriority(given) else { throw NotCommonShape() }
            priority = Int(given)
        }
        var topic = pushType.topic(bundleID: app.bundleID)
        if let range = members.topic {
            topic = text(range)
            guard PushRequestDecoder.isTopic(topic) else { throw NotCommonShape() }
        }
        var collapseID: String?
        if let range = members.collapseID {
            let given = text(range)
            guard PushRequestDecoder.isCollapseID(given) else { throw NotCommonShape() }
            collapseID = given
        }
        var environment = app.environment
        if let range = members.environment {
            guard let given = PushEnvironment(rawValue: text(range)) else { throw NotCommonShape() }
            environment = given
        }
        var apnsID: String?
        if let range = members.apnsID {
            guard tokens.count == 1, let uuid = PushRequestDecoder.canonicalUUID(text(range)) else { throw NotCommonShape() }
            apnsID = uuid
        }
        let id: String
        if let range = members.id {
            id = text(range)
            guard PushRequestDecoder.isRequestID(id) else { throw NotCommonShape() }
        } else {
            id = PushRequestDecoder.defaultID(of: source)
        }
        return PushRequest(id: id, app: app.name, validTokens: tokens, invalidTokens: [],
                           payload: Array(UnsafeBufferPointer(rebasing: bytes[payload])), pushType: pushType,
                           priority: priority, expiration: members.expiration, collapseID: collapseID, topic: topic,
                           environment: environment, apnsID: apnsID, source: source)
    }

    /// Reads the whole text as one object into `members`; false at anything outside the common shape.
    private mutating func readMembers() -> Bool {
        var seen: UInt16 = 0
        skipWhitespace()
        guard take(UInt8(ascii: "{")) else { return false }
        while true {
            skipWhitespace()
            guard let name = plainString() else { return false }  // also `{}`: no tokens, no payload
            skipWhitespace()
            guard take(UInt8(ascii: ":")) else { return false }
            skipWhitespace()
            if let field = RequestField(utf8: UnsafeBufferPointer(rebasing: bytes[name])) {
                let bit: UInt16 = 1 << UInt16(field.rawValue)
                guard seen & bit == 0, readValue(of: field) else { return false }
                seen |= bit
            } else {
                guard let end = try? JSONScanner.validateValue(in: bytes, at: index, enclosingContainers: 1) else { return false }
                index = end
            }
            skipWhitespace()
            if take(UInt8(ascii: "}")) { break }
            guard take(UInt8(ascii: ",")) else { return false }
        }
        skipWhitespace()
        return index == bytes.count
    }

    /// Reads the value of a known member; false when it is not of the common shape.
    private mutating func readValue(of field: RequestField) -> Bool {
        switch field {
        case .payload:
            guard index < bytes.count, bytes[index] == UInt8(ascii: "{"),
                  let end = try? JSONScanner.validateValue(in: bytes, at: index, enclosingContainers: 1) else { return false }
            members.payload = index..<end
            index = end
            return true
        case .priority:
            members.priority = plainInteger()
            return members.priority != nil
        case .expiration:
            members.expiration = plainInteger()
            return members.expiration != nil
        case .tokens:
            let start = index
            guard let (count, first) = plainStringList() else { return false }
            members.tokenList = (start, count, first)
            return true
        case .id, .app, .token, .topic, .environment, .pushType, .collapseID, .apnsID:
            guard let range = plainString() else { return false }
            switch field {
            case .id: members.id = range
            case .app: members.app = range
            case .token: members.token = range
            case .topic: members.topic = range
            case .environment: members.environment = range
            case .pushType: members.pushType = range
            case .collapseID: members.collapseID = range
            default: members.apnsID = range
            }
            return true
        }
    }

    /// The app `name` names (or the only one when absent); nil when its bytes name no app.
    private func app(_ name: Range<Int>?, _ decoder: PushRequestDecoder) -> RegisteredApp? {
        guard let name else { return decoder.singleApp }
        return decoder.appsByName.value(named: UnsafeBufferPointer(rebasing: bytes[name]))
    }

    /// The distinct normalized tokens of `token` or `tokens`; nil unless exactly one of the two
    /// is given, the list is not longer than `limit` (nor than the linear duplicate check) and
    /// every token is well-formed.
    private mutating func tokens(limit: Int) -> [String]? {
        if let range = members.token {
            guard members.tokenList == nil else { return nil }
            return normalizedToken(range).map { [$0] }
        }
        guard let list = members.tokenList, list.count <= limit,
              list.count <= PushRequestDecoder.linearDuplicateCheckLimit else { return nil }
        if list.count == 1 { return normalizedToken(list.first).map { [$0] } }
        var tokens: [String] = []
        tokens.reserveCapacity(list.count)
        index = list.start + 1  // past the `[`; the member walk checked the rest
        for _ in 0..<list.count {
            skipWhitespace()
            guard let range = plainString(), let token = normalizedToken(range) else { return nil }
            if !tokens.contains(token) { tokens.append(token) }
            skipWhitespace()
            _ = take(UInt8(ascii: ","))
        }
        return tokens
    }

    // MARK: Reading

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Steps over `byte` if it is next.
    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// The text of the string that starts here, if it has no escape, control character or
    /// non-ASCII byte (such a string is valid JSON as it stands).
    private mutating func plainString() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let end = ByteScan.firstAttentionByte(in: bytes, from: index, stoppingAtNonASCII: true)
        guard end < bytes.count, bytes[end] == UInt8(ascii: "\"") else { return nil }
        defer { index = end + 1 }
        return index..<end
    }

    /// An array of one or more plain strings: their count, and where the first one's text is.
    private mutating func plainStringList() -> (count: Int, first: Range<Int>)? {
        guard take(UInt8(ascii: "[")) else { return nil }
        skipWhitespace()
        guard let first = plainString() else { return nil }  // also `[]`
        var count = 1
        while true {
            skipWhitespace()
            if take(UInt8(ascii: "]")) { return (count, first) }
            guard take(UInt8(ascii: ",")) else { return nil }
            skipWhitespace()
            guard plainString() != nil else { return nil }
            count += 1
        }
    }

    /// A number written as digits only, without a leading zero, of at most 18 digits (so it fits).
    private mutating func plainInteger() -> Int64? {
        let start = index
        var value: Int64 = 0
        while index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 {
            guard index - start < 18 else { return nil }
            value = value * 10 + Int64(bytes[index] &- UInt8(ascii: "0"))
            index += 1
        }
        guard index > start, bytes[start] != UInt8(ascii: "0") || index - start == 1 else { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") || bytes[index] | 0x20 == UInt8(ascii: "e") {
            return nil  // a fraction or an exponent
        }
        return value
    }

    private func text(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    private func normalizedToken(_ range: Range<Int>) -> String? {
        PushRequestDecoder.normalizedToken(utf8: UnsafeBufferPointer(rebasing: bytes[range]))
    }
}
