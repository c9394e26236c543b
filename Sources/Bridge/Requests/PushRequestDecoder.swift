import JSON
import APNs
/// An app as the decoder needs it: the name requests use, bundle id, default environment.
public struct RegisteredApp: Sendable, Hashable {
    /// The configured name.
    public var name: String
    /// The bundle id (default `apns-topic`).
    public var bundleID: String
    /// The app's default environment.
    public var environment: PushEnvironment

    /// Creates an entry.
    public init(name: String, bundleID: String, environment: PushEnvironment) {
        self.name = name
        self.bundleID = bundleID
        self.environment = environment
    }
}

/// Turns an input record's value into a ``PushRequest`` or a ``DeadLetter`` (contract §2).
///
/// Rules beyond the contract's table: a field given as JSON `null` counts as absent; a field
/// that appears twice at the top level is `invalid_request`; the token count limit applies to
/// the entries as given (before duplicates are removed); `apns_id` requires exactly one distinct
/// token (valid or not); `collapse_id` and `topic` must not be empty, hold control characters
/// or start or end with a space.
public struct PushRequestDecoder: Sendable {
    let appsByName: NamedLookup<RegisteredApp>
    let singleApp: RegisteredApp?
    let maxTokensPerRequest: Int

    /// Creates a decoder for these apps and token limit.
    public init(apps: [RegisteredApp], maxTokensPerRequest: Int) {
        appsByName = NamedLookup(apps.map { ($0.name, $0) })
        singleApp = apps.count == 1 ? apps[0] : nil
        self.maxTokensPerRequest = maxTokensPerRequest
    }

    /// Creates a decoder from the configuration's apps and limits.
    public init(configuration: BridgeConfiguration) {
        self.init(apps: configuration.apps.map { RegisteredApp(name: $0.name, bundleID: $0.bundleID, environment: $0.environment) },
                  maxTokensPerRequest: configuration.limits.maxTokensPerRequest)
    }

    /// Decodes one record value (nil for a Kafka null value / tombstone).
    public func decode(value: [UInt8]?, source: RecordSource) -> PushRequestDecoding {
        if let value, let request = value.withUnsafeBufferPointer({ try? decodeCommonShape($0, source: source) }) {
            return .request(request)
        }
        return decodeInGeneral(value: value, source: source)
    }

    /// Decodes one record value that librdkafka still holds (nil for a null value): the value is
    /// copied only when the fast path does not take it.
    public func decode(borrowing value: UnsafeRawBufferPointer?, source: RecordSource) -> PushRequestDecoding {
        if let value {
            do throws(CommonShapeRequestReader.NotCommonShape) {
                return .request(try decodeCommonShape(value.bindMemory(to: UInt8.self), source: source))
            } catch {}  // the general path decides
        }
        return decodeInGeneral(value: value.map { Array($0) }, source: source)
    }

    /// The fast path (``CommonShapeRequestReader``).
    /// - Throws: `NotCommonShape`: the general path decides.
    func decodeCommonShape(_ bytes: UnsafeBufferPointer<UInt8>,
                           source: RecordSource) throws(CommonShapeRequestReader.NotCommonShape) -> PushRequest {
        var reader = CommonShapeRequestReader(bytes: bytes)
        return try reader.read(with: self, source: source)
    }

    /// The general path alone: any record, through the JSON scanner's tape, to a request or a dead
    /// letter. `decode` answers the same, faster for requests of the common shape; this one is for
    /// tests and fuzzing that compare the two.
    public func decodeInGeneral(value: [UInt8]?, source: RecordSource) -> PushRequestDecoding {
        do throws(DeadLetter) {
            return .request(try decodeRequest(value: value, source: source))
        } catch {
            return .deadLetter(error)
        }
    }

    func decodeRequest(value: [UInt8]?, source: RecordSource) throws(DeadLetter) -> PushRequest {
        guard let value else {
            throw DeadLetter(code: .invalidRequest, detail: "the record has no value (null)")
        }
        let document: JSONDocument
        do {
            document = try JSONScanner.parse(value)
        } catch {
            throw DeadLetter(code: .invalidJSON, detail: error.description)
        }
        let fields = try RequestFields(root: document.root)
        let id = try decodeID(fields.id, source: source)
        do throws(DeadLetter) {
            return try decodeRequest(fields, id: id, source: source)
        } catch {
            // Past its id, a record that breaks a rule is still known by it (its dead letter's
            // `request-id` header).
            var named = error
            named.requestID = id
            throw named
        }
    }

    /// The fields after the id (`decodeRequest(value:source:)`).
    private func decodeRequest(_ fields: RequestFields, id: String, source: RecordSource) throws(DeadLetter) -> PushRequest {
        let app = try decodeApp(fields.app)
        let tokens = try decodeTokens(token: fields.token, tokens: fields.tokens)

        guard let payload = fields.payload else { throw invalid("payload", "required") }
        guard payload.kind == .object else { throw invalid("payload", "must be a JSON object") }

        var pushType = PushType.alert
        if let value = fields.pushType {
            guard let text = value.stringValue else { throw invalid("push_type", "must be a string") }
            guard let type = PushType(rawValue: text) else {
                throw invalid("push_type", "unknown push type \(Self.quoted(text))")
            }
            pushType = type
        }
        let payloadSize = payload.rawRange.count
        guard payloadSize <= pushType.maximumPayloadBytes else {
            throw DeadLetter(code: .payloadTooLarge,
                             detail: "field \"payload\": \(payloadSize) bytes, the limit for push type \(pushType.rawValue) is \(pushType.maximumPayloadBytes)")
        }

        var priority = pushType.defaultPriority
        if let value = fields.priority {
            guard let number = value.integralValue, Self.isPriority(number) else {
                throw invalid("priority", "must be 10, 5 or 1")
            }
            priority = Int(number)
        }
        var expiration: Int64?
        if let value = fields.expiration {
            guard let number = value.integralValue, number >= 0 else {
                throw invalid("expiration", "must be a non-negative integer (unix seconds)")
            }
            expiration = number
        }
        var collapseID: String?
        if let value = fields.collapseID {
            guard let text = value.stringValue, Self.isCollapseID(text) else {
                throw invalid("collapse_id", "must be a string of 1 to 64 bytes without control characters or surrounding spaces")
            }
            collapseID = text
        }
        var topic = pushType.topic(bundleID: app.bundleID)
        if let value = fields.topic {
            guard let text = value.stringValue, Self.isTopic(text) else {
                throw invalid("topic", "must be a string of 1 to 255 bytes without control characters or surrounding spaces")
            }
            topic = text
        }
        var environment = app.environment
        if let value = fields.environment {
            guard let text = value.stringValue, let parsed = PushEnvironment(rawValue: text) else {
                throw invalid("environment", "must be \"production\" or \"sandbox\"")
            }
            environment = parsed
        }
        var apnsID: String?
        if let value = fields.apnsID {
            guard let text = value.stringValue, let uuid = Self.canonicalUUID(text) else {
                throw invalid("apns_id", "must be a UUID such as 123e4567-e89b-12d3-a456-426614174000")
            }
            guard tokens.valid.count + tokens.invalid.count == 1 else {
                throw invalid("apns_id", "only allowed with exactly one token")
            }
            apnsID = uuid
        }
        return PushRequest(id: id, app: app.name, validTokens: tokens.valid, invalidTokens: tokens.invalid,
                           payload: Array(payload.rawBytes), pushType: pushType, priority: priority,
                           expiration: expiration, collapseID: collapseID, topic: topic, environment: environment,
                           apnsID: apnsID, source: source)
    }

    func decodeID(_ value: JSONValue?, source: RecordSource) throws(DeadLetter) -> String {
        guard let value else { return Self.defaultID(of: source) }
        guard let text = value.stringValue, Self.isRequestID(text) else {
            throw invalid("id", "must be a string of 1 to 256 characters")
        }
        return text
    }

    /// The id of a request without one: `<topic>/<partition>/<offset>`.
    static func defaultID(of source: RecordSource) -> String {
        "\(source.topic)/\(source.partition)/\(source.offset)"
    }

    func decodeApp(_ value: JSONValue?) throws(DeadLetter) -> RegisteredApp {
        guard let value else {
            guard let singleApp else {
                throw invalid("app", "required when more than one app is configured")
            }
            return singleApp
        }
        if let found = value.withUnescapedUTF8({ appsByName.value(named: $0) }), let app = found { return app }
        guard let name = value.stringValue else { throw invalid("app", "must be a string") }
        guard let app = appsByName[name] else {
            throw DeadLetter(code: .unknownApp, detail: "field \"app\": unknown app \(Self.quoted(name))")
        }
        return app
    }

    func invalid(_ field: String, _ message: String) -> DeadLetter {
        DeadLetter(code: .invalidRequest, detail: "field \"\(field)\": \(message)")
    }

    /// A request-supplied string quoted for a detail message, cut to 64 characters.
    static func quoted(_ text: String) -> String {
        let cut = text.unicodeScalars.count > 64 ? String(String.UnicodeScalarView(text.unicodeScalars.prefix(64))) + "…" : text
        return "\"\(cut)\""
    }

    /// `id`: 1 to 256 characters. At most 256 bytes are at most 256 characters: only longer ids
    /// are counted.
    static func isRequestID(_ text: String) -> Bool {
        !text.isEmpty && (text.utf8.count <= 256 || text.unicodeScalars.count <= 256)
    }

    /// `priority`: 10, 5 or 1.
    static func isPriority(_ number: Int64) -> Bool {
        number == 10 || number == 5 || number == 1
    }

    /// `collapse_id`: 1 to 64 bytes, header-safe.
    static func isCollapseID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64 && isHeaderSafe(text)
    }

    /// `topic`: 1 to 255 bytes, header-safe.
    static func isTopic(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 255 && isHeaderSafe(text)
    }

    /// No control characters, and no space first or last: an HTTP/2 header value with either is
    /// malformed (RFC 9113 §8.2.1), and a server resets its stream, which would be retried as a
    /// lost connection until the attempts run out instead of refused at once.
    static func isHeaderSafe(_ text: String) -> Bool {
        text.utf8.first != 0x20 && text.utf8.last != 0x20 && text.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
    }
}
