import Observability

/// A record header: its name, and its value or nil for a null value (Kafka headers may have
/// one, and a dead letter repeats it as it was).
///
/// Kafka clients write header names as UTF-8, but a record may carry any bytes there. A name that
/// is not UTF-8 keeps its bytes in ``rawName``, so a dead letter repeats it byte for byte;
/// ``name`` then holds the name with invalid sequences replaced by U+FFFD, which matches no name
/// the bridge looks for. (librdkafka's C API hands names over NUL-terminated, so a name ends at
/// its first NUL byte, on reading and on writing.) Two headers are equal when their names' bytes
/// and their values are.
public struct KafkaHeader: Sendable, Equatable {
    /// The name as text.
    public private(set) var name: String
    /// The name's bytes when they are not valid UTF-8; nil when `name`'s UTF-8 is the name.
    public private(set) var rawName: [UInt8]?
    /// The value, or nil for a null value.
    public var value: [UInt8]?

    /// A header named `name`.
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.rawName = nil
        self.value = value
    }

    /// A header whose name is `nameBytes` as a record carries them, UTF-8 or not.
    public init(nameBytes: UnsafeRawBufferPointer, value: [UInt8]?) {
        if let text = String(validating: nameBytes, as: UTF8.self) {
            self.name = text
            self.rawName = nil
        } else {
            self.name = String(decoding: nameBytes, as: UTF8.self)
            self.rawName = Array(nameBytes)
        }
        self.value = value
    }

    /// Bytes the name and value take in a record.
    public var byteCount: Int {
        (rawName?.count ?? name.utf8.count) + (value?.count ?? 0)
    }

    public static func == (lhs: KafkaHeader, rhs: KafkaHeader) -> Bool {
        lhs.value == rhs.value && lhs.withNameBytes { left in rhs.withNameBytes { left.elementsEqual($0) } }
    }

    /// Calls `body` with the name's bytes as the record carries them.
    public func withNameBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        if let rawName { return rawName.withUnsafeBytes(body) }
        return name.withUTF8Bytes { body(UnsafeRawBufferPointer($0)) }
    }
}

/// A record read from Kafka.
///
/// Optional properties that hold references are declared `Optional<…>`, not `…?`: a `var x: T?`
/// starts out as nil, and the compiler then copied and destroyed the whole value at the end of
/// every `init` (docs/BENCHMARKS.md).
public struct KafkaMessage: Sendable {
    /// The topic the record was read from.
    public var topic: String
    /// The partition the record was read from.
    public var partition: Int32
    /// The record's offset within its partition.
    public var offset: Int64
    /// The record key, or nil for a null key.
    public var key: Optional<[UInt8]>
    /// The record value, or nil for a null value (a tombstone).
    public var value: Optional<[UInt8]>
    /// The record headers in their original order; a null header value is nil.
    public var headers: [KafkaHeader]
    /// The record timestamp in milliseconds since the epoch, nil when not available.
    public var timestampMilliseconds: Int64?

    /// Creates a message (tests and tools; consumers build them from librdkafka records).
    public init(
        topic: String,
        partition: Int32,
        offset: Int64,
        key: [UInt8]?,
        value: [UInt8]?,
        headers: [KafkaHeader],
        timestampMilliseconds: Int64?
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }

    /// The topic-partition the record belongs to.
    public var topicPartition: KafkaTopicPartition {
        KafkaTopicPartition(topic: topic, partition: partition)
    }

    /// The value of the first header called `name`, or nil (also for a null value).
    public func header(_ name: String) -> [UInt8]? {
        headers.first(where: { $0.name == name })?.value ?? nil
    }
}
