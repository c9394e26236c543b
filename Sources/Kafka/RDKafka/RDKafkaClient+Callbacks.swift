import CRdKafka
import Observability
import Synchronization

extension RDKafkaClient {
    /// Registers the C callbacks on `conf`. Each finds its ``RDKafkaClientContext`` through the
    /// configuration opaque; none captures Swift state.
    static func registerCallbacks(kind: Kind, on conf: OpaquePointer) {
        // May run on any librdkafka thread; must not call librdkafka (rd_kafka_opaque is a getter).
        rd_kafka_conf_set_log_cb(conf) { rk, level, facility, text in
            guard let context = RDKafkaClientContext.of(rk) else { return }
            let logLevel = RDKafkaClientContext.level(syslog: level)
            guard context.logger.isEnabled(logLevel) else { return }
            let message = context.redacting(text.map { String(cString: $0) } ?? "")
            let facilityName = facility.map { String(cString: $0) } ?? ""
            context.logger.log(logLevel, message, metadata: ["facility": facilityName])
        }
        // Served by rd_kafka_poll / rd_kafka_consumer_poll on the polling thread.
        rd_kafka_conf_set_error_cb(conf) { rk, rawCode, reason, opaque in
            let code = rd_kafka_resp_err_t(rawValue: rawCode)
            guard let context = RDKafkaClientContext.of(opaque: opaque) else { return }
            let text = context.redacting(reason.map { String(cString: $0) } ?? String(cString: rd_kafka_err2str(code)))
            guard code == RD_KAFKA_RESP_ERR__FATAL else {
                // Connection failures are already in librdkafka's own log line (log_cb).
                let level: Logger.Level = code == RD_KAFKA_RESP_ERR__TRANSPORT ? .debug : .warning
                context.logger.log(level, "librdkafka error", metadata: [
                    "error": KafkaError.name(of: code.rawValue), "reason": text,
                ])
                return
            }
            var fatalText = [CChar](repeating: 0, count: 512)
            let fatalCode = rk.map { rd_kafka_fatal_error($0, &fatalText, fatalText.count) } ?? code
            let error = KafkaError(code: fatalCode.rawValue, message: context.redacting(String(cBuffer: fatalText)), isFatal: true)
            context.logger.error("librdkafka fatal error", metadata: ["error": error.description])
            context.fatalError.withLock { stored in
                if stored == nil { stored = error }
            }
        }
        // Served by rd_kafka_poll / rd_kafka_consumer_poll every `statistics.interval.ms`.
        rd_kafka_conf_set_stats_cb(conf, statisticsCallback)
        switch kind {
        case .producer:
            rd_kafka_conf_set_dr_msg_cb(conf, deliveryReportCallback)
        case .consumer:
            rd_kafka_conf_set_rebalance_cb(conf, rebalanceCallback)
            // Served only where a queue is served with callbacks: the close's queue, which
            // librdkafka forwards the consumer's fetched records to. Without a consume callback
            // it aborts on the first such record (an op not handled); records left there are
            // dropped unprocessed, and stay uncommitted. `rd_kafka_consumer_poll` never calls it.
            rd_kafka_conf_set_consume_cb(conf) { _, _ in }
        }
    }
}

/// librdkafka's statistics: the JSON is copied out and handed to the client's handler. Returning 0
/// lets librdkafka free its buffer.
private let statisticsCallback: @convention(c) (
    OpaquePointer?, UnsafeMutablePointer<CChar>?, Int, UnsafeMutableRawPointer?
) -> Int32 = { _, json, length, opaque in
    guard let json, length > 0, let context = RDKafkaClientContext.of(opaque: opaque),
          let handler = context.statisticsHandler.withLock({ $0 }) else { return 0 }
    handler(Array(UnsafeRawBufferPointer(start: json, count: length)))
    return 0
}

/// One delivery report: served by `rd_kafka_poll`/`rd_kafka_flush` on the producer's poll
/// thread. The message opaque carries the caller's tag in its pointer bits, so the success
/// path allocates nothing.
private let deliveryReportCallback: @convention(c) (
    OpaquePointer?, UnsafePointer<rd_kafka_message_t>?, UnsafeMutableRawPointer?
) -> Void = { rk, message, opaque in
    guard let message, let context = RDKafkaClientContext.of(opaque: opaque),
        let handler = context.deliveryHandler
    else { return }
    let tag = apnsb_rd_kafka_message_tag(message)
    let code = message.pointee.err
    guard code != RD_KAFKA_RESP_ERR_NO_ERROR else {
        handler(tag, nil)
        return
    }
    var error = KafkaError(code, context: "delivery failed")
    if code == RD_KAFKA_RESP_ERR__FATAL, let rk {
        var text = [CChar](repeating: 0, count: 512)
        let fatalCode = rd_kafka_fatal_error(rk, &text, text.count)
        error = KafkaError(code: fatalCode.rawValue, message: "delivery failed: \(context.redacting(String(cBuffer: text)))", isFatal: true)
    }
    handler(tag, error)
}

/// Group rebalances: served inside `rd_kafka_consumer_poll` (and `rd_kafka_consumer_close`) on
/// the polling thread. Follows rdkafka.h: incremental assign/unassign for the cooperative
/// protocol, full assign/assign(NULL) for eager, assign(NULL) on anything unexpected.
/// `partitions` belongs to librdkafka and is copied, never saved.
private let rebalanceCallback: @convention(c) (
    OpaquePointer?, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    UnsafeMutableRawPointer?
) -> Void = { rk, code, partitions, opaque in
    guard let rk else { return }
    let context = RDKafkaClientContext.of(opaque: opaque)
    let logger = context?.logger ?? Logger(label: "kafka.consumer")
    let handler = context?.rebalanceHandler.withLock { $0 }
    let changed = RDKafkaTopicPartitionList.partitions(of: partitions)
    let isCooperative = rd_kafka_rebalance_protocol(rk).map { String(cString: $0) } == "COOPERATIVE"

    switch code {
    case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
        logger.info("partitions assigned", metadata: [
            "partitions": changed.map(\.description).joined(separator: ","),
            "protocol": isCooperative ? "cooperative" : "eager",
        ])
        // Assigned again within the same poll: its records are this member's again. (Records
        // fetched before the revocation may come twice then; at least once, never lost.)
        context?.revokedDuringPoll.remove(changed)
        // Told before the assign, so that a pause made in the handler holds from the first
        // fetch. Made after it, a pause races the fetch start librdkafka's main thread issues
        // once the committed offsets arrive: each takes a version when it is made, and a pause
        // reaching the partition after a newer fetch start is dropped as outdated, unreported.
        // Pausing a partition not assigned yet needs librdkafka's local topic, which the assign
        // would make: held open across both.
        let localTopics = Set(changed.map(\.topic)).compactMap { rd_kafka_topic_new(rk, $0, nil) }
        defer { localTopics.forEach { rd_kafka_topic_destroy($0) } }
        handler?(.assigned(changed))
        if isCooperative {
            if let error = rd_kafka_incremental_assign(rk, partitions) {
                logger.error("incremental assign failed", metadata: ["error": KafkaError(consuming: error).description])
            }
        } else {
            let result = rd_kafka_assign(rk, partitions)
            if result != RD_KAFKA_RESP_ERR_NO_ERROR {
                logger.error("assign failed", metadata: ["error": KafkaError(result).description])
            }
        }

    case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
        let isLost = rd_kafka_assignment_lost(rk) != 0
        logger.info(isLost ? "partitions lost" : "partitions revoked", metadata: [
            "partitions": changed.map(\.description).joined(separator: ","),
        ])
        context?.revokedDuringPoll.add(changed)
        handler?(isLost ? .lost(changed) : .revoked(changed))
        if isCooperative {
            if let error = rd_kafka_incremental_unassign(rk, partitions) {
                logger.error("incremental unassign failed", metadata: ["error": KafkaError(consuming: error).description])
            }
        } else {
            let result = rd_kafka_assign(rk, nil)
            if result != RD_KAFKA_RESP_ERR_NO_ERROR {
                logger.error("unassign failed", metadata: ["error": KafkaError(result).description])
            }
        }

    default:
        logger.error("rebalance error; clearing the assignment", metadata: ["error": KafkaError(code).description])
        _ = rd_kafka_assign(rk, nil)
    }
}
