import CRdKafka

/// An error from librdkafka or from this module's use of it.
///
/// `code` is librdkafka's `rd_kafka_resp_err_t` value (negative for client-side errors such as
/// `-184` queue full, positive for broker error codes), so it is stable across releases.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// librdkafka's error code (`rd_kafka_resp_err_t`).
    public var code: Int32
    /// What went wrong, in words. Never contains configuration values.
    public var message: String
    /// The client instance is unusable and must be closed and re-created.
    public var isFatal: Bool
    /// Trying the same operation again may succeed.
    public var isRetriable: Bool
    /// A transactional producer must abort the current transaction before it can go on
    /// (`rd_kafka_error_txn_requires_abort`).
    public var transactionRequiresAbort: Bool

    /// Creates an error.
    public init(
        code: Int32, message: String, isFatal: Bool = false, isRetriable: Bool = false,
        transactionRequiresAbort: Bool = false
    ) {
        self.code = code
        self.message = message
        self.isFatal = isFatal
        self.isRetriable = isRetriable
        self.transactionRequiresAbort = transactionRequiresAbort
    }

    /// `KafkaError(<code name>): <message>`.
    public var description: String {
        "KafkaError(\(KafkaError.name(of: code))): \(message)"
    }

    /// librdkafka's symbolic name of an error code, e.g. `_QUEUE_FULL` or `REQUEST_TIMED_OUT`.
    public static func name(of code: Int32) -> String {
        String(cString: rd_kafka_err2name(rd_kafka_resp_err_t(rawValue: code)))
    }

    /// Error codes used by this module's callers and tests (librdkafka's values).
    public enum Code {
        /// The local produce queue is full (`RD_KAFKA_RESP_ERR__QUEUE_FULL`).
        public static let queueFull: Int32 = RD_KAFKA_RESP_ERR__QUEUE_FULL.rawValue
        /// A message was not delivered within `message.timeout.ms` (`RD_KAFKA_RESP_ERR__MSG_TIMED_OUT`).
        public static let messageTimedOut: Int32 = RD_KAFKA_RESP_ERR__MSG_TIMED_OUT.rawValue
        /// The message was purged before delivery, e.g. at close (`RD_KAFKA_RESP_ERR__PURGE_QUEUE`).
        public static let purged: Int32 = RD_KAFKA_RESP_ERR__PURGE_QUEUE.rawValue
        /// The message was purged while a produce request carried it (`RD_KAFKA_RESP_ERR__PURGE_INFLIGHT`).
        public static let purgedInFlight: Int32 = RD_KAFKA_RESP_ERR__PURGE_INFLIGHT.rawValue
        /// The codes of records a producer's `close` did not deliver: purged from its queues, or
        /// never handed to librdkafka (``closed``).
        public static let leftAtClose: Set<Int32> = [purged, purgedInFlight, closed]
        /// An invalid argument or configuration (`RD_KAFKA_RESP_ERR__INVALID_ARG`).
        public static let invalidArgument: Int32 = RD_KAFKA_RESP_ERR__INVALID_ARG.rawValue
        /// The client was already closed (`RD_KAFKA_RESP_ERR__DESTROY`).
        public static let closed: Int32 = RD_KAFKA_RESP_ERR__DESTROY.rawValue
        /// The caller's deadline for an answer passed first (`RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE`):
        /// the operation, e.g. a commit waited for with a deadline, goes on inside librdkafka.
        /// librdkafka's own `_TIMED_OUT` (a request it gave up on) is another code.
        public static let answerNotAwaited: Int32 = RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE.rawValue
        /// The broker's request timeout error (`REQUEST_TIMED_OUT`, 7), retriable.
        public static let requestTimedOut: Int32 = RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT.rawValue
        /// The broker is not the partition leader (`NOT_LEADER_FOR_PARTITION`, 6), retriable.
        public static let notLeaderForPartition: Int32 = RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION.rawValue
        /// Not enough in-sync replicas (`NOT_ENOUGH_REPLICAS`, 19), retriable.
        public static let notEnoughReplicas: Int32 = RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS.rawValue
        /// The broker connection failed (`RD_KAFKA_RESP_ERR__TRANSPORT`).
        public static let transport: Int32 = RD_KAFKA_RESP_ERR__TRANSPORT.rawValue
        /// Another producer with the same `transactional.id` took over (`PRODUCER_FENCED`, 90).
        public static let producerFenced: Int32 = RD_KAFKA_RESP_ERR_PRODUCER_FENCED.rawValue
        /// The producer's epoch is stale: it was fenced (`INVALID_PRODUCER_EPOCH`, 47).
        public static let invalidProducerEpoch: Int32 = RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH.rawValue
        /// The client-side fenced state (`RD_KAFKA_RESP_ERR__FENCED`).
        public static let fenced: Int32 = RD_KAFKA_RESP_ERR__FENCED.rawValue
        /// The group coordinator turning a member's commit away: the group is rebalancing, or the
        /// member's generation or id is no longer the group's.
        public static let groupRefusals: Set<Int32> = [
            rebalanceInProgress, RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION.rawValue, RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID.rawValue,
        ]
        /// The group is rebalancing (`REBALANCE_IN_PROGRESS`, 27).
        public static let rebalanceInProgress: Int32 = RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS.rawValue
        /// The record is larger than the broker accepts (`MSG_SIZE_TOO_LARGE`, 10).
        public static let messageSizeTooLarge: Int32 = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE.rawValue
    }
}

extension KafkaError {
    /// An error for a librdkafka error code, with librdkafka's text for it.
    init(_ code: rd_kafka_resp_err_t, context: String? = nil) {
        let text = String(cString: rd_kafka_err2str(code))
        self.init(
            code: code.rawValue,
            message: context.map { "\($0): \(text)" } ?? text,
            isFatal: code == RD_KAFKA_RESP_ERR__FATAL,
            isRetriable: KafkaError.isRetriableCode(code)
        )
    }

    /// An error built from an `rd_kafka_error_t`, which this call destroys.
    init(consuming error: OpaquePointer, context: String? = nil) {
        let text = String(cString: rd_kafka_error_string(error))
        self.init(
            code: rd_kafka_error_code(error).rawValue,
            message: context.map { "\($0): \(text)" } ?? text,
            isFatal: rd_kafka_error_is_fatal(error) != 0,
            isRetriable: rd_kafka_error_is_retriable(error) != 0,
            transactionRequiresAbort: rd_kafka_error_txn_requires_abort(error) != 0
        )
        rd_kafka_error_destroy(error)
    }

    /// A configuration problem; `message` must name the property but never its value.
    static func configuration(_ message: String) -> KafkaError {
        KafkaError(code: Code.invalidArgument, message: message)
    }

    /// Whether this error says another producer with the same `transactional.id` took over
    /// (this instance is a zombie and must stop).
    public var isFencing: Bool {
        [Code.producerFenced, Code.invalidProducerEpoch, Code.fenced].contains(code)
            || message.contains("PRODUCER_FENCED") || message.contains("INVALID_PRODUCER_EPOCH")
    }

    /// The operation was called after `close()`.
    static func closed(_ what: String) -> KafkaError {
        KafkaError(code: Code.closed, message: "\(what) is closed")
    }

    /// Transient conditions that a later attempt may get past.
    static func isRetriableCode(_ code: rd_kafka_resp_err_t) -> Bool {
        switch code {
        case RD_KAFKA_RESP_ERR__QUEUE_FULL, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR__TIMED_OUT,
            RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE,
            RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND, RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION,
            RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_NOT_COORDINATOR, RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
            true
        default:
            false
        }
    }
}
