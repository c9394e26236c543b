import Metrics

extension BridgeMetrics {
    /// Names, types and help texts of the families recorded as events happen (contract §10); the
    /// ones read at scrape time are registered in `BridgePipeline+Status.swift`.
    static func describeFamilies(_ registry: MetricsRegistry) {
        registry.describe("apns_bridge_records_consumed_total", .counter,
                          help: "Input records taken from Kafka, by topic.")
        registry.describe("apns_bridge_notifications_total", .counter,
                          help: "Final outcomes per device token (delivered, rejected, failed, expired, invalid), by app.")
        registry.describe("apns_bridge_apns_responses_total", .counter,
                          help: "Every answer APNs gave, retried or final, by app, status (4xx or 5xx for a status Apple does not document) and reason (none for 200, other outside Apple's documented sets).")
        registry.describe("apns_bridge_retries_total", .counter,
                          help: "Notifications sent again, by app and cause.")
        registry.describe("apns_bridge_connection_closes_total", .counter,
                          help: "APNs connections closed, by app and reason (goaway, lost, ping_timeout, connect_failed, no_streams_allowed, stream_ids_exhausted).")
        registry.describe("apns_bridge_dead_letters_total", .counter,
                          help: "Input records sent to the dead-letter topic, by error code.")
        registry.describe("apns_bridge_invalid_tokens_total", .counter,
                          help: "Records published on the invalid-tokens topic, by app and reason.")
        registry.describe("apns_bridge_apns_request_duration_seconds", .histogram,
                          help: "Round trip of one APNs request, from the stream's start to its answer, by app.",
                          buckets: requestDurationBuckets)
        registry.describe("apns_bridge_end_to_end_latency_seconds", .histogram,
                          help: "From the input record's Kafka timestamp to the final answer, by app.",
                          buckets: endToEndBuckets)
    }
}
