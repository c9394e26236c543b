/// One notification to one device token, ready to become an HTTP/2 request.
///
/// `payload` is the JSON body exactly as sent; every token of a push request shares the same
/// array storage (copy-on-write), so fan-out never copies or re-encodes it.
///
/// Optional properties that hold references are declared `Optional<…>`, not `…?`: a `var x: T?`
/// starts out as nil, and the compiler then copied and destroyed the whole value at the end of
/// every `init` (docs/BENCHMARKS.md).
public struct APNsNotification: Sendable {
    /// The device token, hexadecimal.
    public var token: String
    /// `apns-push-type`.
    public var pushType: APNsPushType
    /// `apns-priority`: 10, 5 or 1.
    public var priority: Int
    /// `apns-expiration` in Unix seconds (0 = try once); nil omits the header.
    public var expiration: Int64?
    /// `apns-collapse-id` (at most 64 bytes).
    public var collapseID: Optional<String>
    /// `apns-topic`: bundle id plus the push type's suffix, unless overridden.
    public var topic: String
    /// `apns-id` (canonical UUID); nil lets APNs generate one.
    public var apnsID: Optional<String>
    /// The JSON payload bytes.
    public var payload: [UInt8]

    /// Creates a notification; `priority` defaults to the push type's default.
    public init(
        token: String,
        pushType: APNsPushType = .alert,
        priority: Int? = nil,
        expiration: Int64? = nil,
        collapseID: String? = nil,
        topic: String,
        apnsID: String? = nil,
        payload: [UInt8]
    ) {
        self.token = token
        self.pushType = pushType
        self.priority = priority ?? pushType.defaultPriority
        self.expiration = expiration
        self.collapseID = collapseID
        self.topic = topic
        self.apnsID = apnsID
        self.payload = payload
    }
}
