import CRdKafka
import Observability
import Synchronization

/// What librdkafka's C callbacks need from Swift: the logger and the handlers of one client.
///
/// Passed to librdkafka as the configuration opaque (retained by ``RDKafkaClient`` until the
/// `rd_kafka_t` is destroyed), so callbacks on any librdkafka thread can reach it.
final class RDKafkaClientContext: Sendable {
    /// Where librdkafka's log lines go.
    let logger: Logger
    /// Receives every delivery report (producers only).
    let deliveryHandler: (@Sendable (UInt64, KafkaError?) -> Void)?
    /// Called by the rebalance callback (consumers only); set at any time.
    let rebalanceHandler = Locked<(@Sendable (KafkaRebalanceEvent) -> Void)?>(nil)
    /// Partitions revoked or lost by rebalances during the current `poll` (consumers only).
    let revokedDuringPoll = RevokedPartitions()
    /// Receives librdkafka's statistics JSON every `statistics.interval.ms`; set at any time.
    let statisticsHandler = Locked<(@Sendable ([UInt8]) -> Void)?>(nil)
    /// The first fatal error reported by librdkafka's error callback, if any.
    let fatalError = Locked<KafkaError?>(nil)
    /// The values of the client's secret properties (``KafkaPropertyRules/isSecret(_:)``),
    /// longest first: librdkafka quotes configuration values in some of its texts (an
    /// unparsable `sasl.oauthbearer.config`), and none may reach a log line or an error.
    private let secretValues = Locked<[String]>([])

    init(logger: Logger, deliveryHandler: (@Sendable (UInt64, KafkaError?) -> Void)? = nil) {
        self.logger = logger
        self.deliveryHandler = deliveryHandler
    }

    /// Remembers the secret values among `properties` (before the client exists): each whole,
    /// and each word of at least 4 characters in it (librdkafka may quote the rest of a value
    /// from the word it could not parse on), with the part after `=` of a `key=value` word.
    func keepSecrets(of properties: [(name: String, value: String)]) {
        var pieces: Set<String> = []
        for (name, value) in properties where KafkaPropertyRules.isSecret(name) && !value.isEmpty {
            pieces.insert(value)
            for word in value.split(whereSeparator: { $0.isWhitespace || $0 == "," || $0 == ";" }) {
                var parts = [word]
                if let equals = word.firstIndex(of: "=") { parts.append(word[word.index(after: equals)...]) }
                pieces.formUnion(parts.filter { $0.count >= 4 }.map(String.init))
            }
        }
        secretValues.withLock { $0 = pieces.sorted { $0.count > $1.count } }
    }

    /// `text` with every secret value replaced by `<redacted>`.
    func redacting(_ text: String) -> String {
        let values = secretValues.withLock { $0 }
        guard !values.isEmpty else { return text }
        return values.reduce(text) { $0.replacing($1, with: "<redacted>") }
    }

    /// The context registered as `rk`'s opaque.
    ///
    /// - Important: only valid while the ``RDKafkaClient`` that owns `rk` is alive, which holds
    ///   for every callback librdkafka makes on `rk`.
    static func of(_ rk: OpaquePointer?) -> RDKafkaClientContext? {
        guard let rk, let opaque = rd_kafka_opaque(rk) else { return nil }
        return Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
    }

    /// The context passed as a callback's `opaque` argument.
    static func of(opaque: UnsafeMutableRawPointer?) -> RDKafkaClientContext? {
        guard let opaque else { return nil }
        return Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
    }

    /// Maps a syslog level (librdkafka's `log_cb` levels, 0 = emergency … 7 = debug) to ours.
    static func level(syslog: Int32) -> Logger.Level {
        switch syslog {
        case ...3: .error
        case 4: .warning
        case 5, 6: .info
        default: .debug
        }
    }
}
