import Glibc
import Kafka
import HTTP2
import Observability
import Synchronization

/// Sends one push request straight to APNs, without Kafka, and returns its results: the engine
/// of `apns-bridge send`. It uses the same decoder, dispatcher and answer interpretation as the
/// pipeline, so what it prints is what the pipeline would publish.
public enum OneShotSender {
    /// Decodes `requestJSON` like an input record and sends it.
    /// - Returns: one result per distinct token, or the dead letter the pipeline would publish.
    /// - Throws: `PipelineError` when credentials or event loops cannot be set up.
    public static func send(
        requestJSON: [UInt8],
        configuration: BridgeConfiguration,
        timeoutSeconds: Int = 30
    ) throws(PipelineError) -> Result<[PushResult], DeadLetter> {
        let source = RecordSource(topic: "command-line", partition: 0, offset: 0)
        let request: PushRequest
        switch PushRequestDecoder(configuration: configuration).decode(value: requestJSON, source: source) {
        case .deadLetter(let deadLetter):
            return .failure(deadLetter)
        case .request(let decoded):
            request = decoded
        }
        let group: EventLoopGroup
        do {
            group = try EventLoopGroup(threads: 1, name: "apns-send")
        } catch {
            throw PipelineError(component: "event loops", message: "\(error)")
        }
        defer { group.shutdown() }
        let sink = CollectingResultSink()
        let dispatcher = try NotificationDispatcher(configuration: configuration, group: group, publisher: sink)
        let progress = PartitionProgress(topicPartition: .init(topic: source.topic, partition: 0),
                                         storeQueue: OffsetStoreQueue { _, _ in })  // nothing to commit
        _ = progress.track(0)  // a fresh tracker always takes its first offset
        let context = RequestContext(
            source: source, requestID: request.id, app: request.app, environment: request.environment,
            startedAtMilliseconds: Timestamp.nowMilliseconds(), partition: progress
        )
        dispatcher.dispatch(request, context: context)
        dispatcher.flush()
        context.release()
        let expected = request.validTokens.count + request.invalidTokens.count
        _ = BoundedWait(timeoutNanoseconds: UInt64(timeoutSeconds) * 1_000_000_000).wait(
            now: { Timestamp.monotonicNanoseconds() }, until: { sink.count >= expected }, shouldStop: { false },
            sleep: { usleep(2_000) })
        let unanswered = expected - sink.count
        if unanswered > 0 {
            // Their results come from the shutdown (connection lost): say why they end here.
            Logger(label: "bridge.send").warning("the timeout passed before every result: the notifications still waiting are abandoned", metadata: [
                "timeout_seconds": "\(timeoutSeconds)", "bridge.unanswered": "\(unanswered)",
            ])
        }
        dispatcher.shutdown()
        return .success(sink.results)
    }
}

/// Keeps results in memory instead of producing them.
final class CollectingResultSink: ResultSink {
    private let collected = Locked<[PushResult]>([])

    var count: Int { collected.withLock { $0.count } }
    var results: [PushResult] { collected.withLock { $0 } }

    func publishResult(_ result: PushResult, context: RequestContext) {
        collected.withLock { $0.append(result) }
    }

    func publishInvalidToken(_ record: InvalidTokenRecord, context: RequestContext) {}
}
