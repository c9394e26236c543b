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

    init(logger: Logger, deliveryHandler: (@Sendable (UInt64, KafkaError?) -> Void)? = nil) {
        self.logger = logger
        self.deliveryHandler = deliveryHandler
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
