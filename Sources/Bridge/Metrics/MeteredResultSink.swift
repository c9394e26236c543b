/// A `ResultSink` that counts every output where it is created (outcome, end-to-end latency,
/// invalid tokens), then passes it on: results are counted whatever becomes of them in Kafka,
/// and never in a librdkafka callback.
struct MeteredResultSink: ResultSink {
    let sink: ResultSink
    let metrics: BridgeMetrics

    func publishResult(_ result: PushResult, context: RequestContext) {
        metrics.recordResult(app: result.app, outcome: result.outcome, latencyMilliseconds: result.latencyMilliseconds)
        sink.publishResult(result, context: context)
    }

    func publishInvalidToken(_ record: InvalidTokenRecord, context: RequestContext) {
        metrics.recordInvalidToken(app: record.app, reason: record.reason)
        sink.publishInvalidToken(record, context: context)
    }
}
