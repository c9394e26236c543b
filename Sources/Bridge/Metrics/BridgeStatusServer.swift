import HTTP2
import Metrics
import Observability
import Synchronization

/// The operator's HTTP endpoints on `http.listen` (contract §10): `GET /metrics` (Prometheus
/// text 0.0.4), `GET /healthz` and `GET /readyz`.
///
/// Runs on an event loop of its own, so a scrape never waits behind APNs traffic and a stuck
/// APNs loop shows on `/healthz` instead of hiding it. Answers are computed on that loop from
/// atomics and short locks; nothing there blocks.
///
/// `apns-bridge run` binds first and attaches the pipeline after, so an address that cannot be
/// bound stops the process before it creates any Kafka client (a misconfigured instance never
/// joins the consumer group). Until then every endpoint answers `starting`: `/healthz` with
/// 200 (the process works), the others with 503.
public final class BridgeStatusServer: Sendable {
    /// The bound port (the ephemeral one when `http.listen` has port 0).
    public let port: Int
    /// How long an APNs event loop may go without running a submitted task before `/healthz`
    /// fails, and the same for the consumer loop's iterations.
    public let stallThreshold: Duration
    private let loop: EventLoop
    private let server: HTTP1Server
    private let served: Locked<Served?>

    /// What the endpoints read once a pipeline is attached.
    private struct Served {
        weak var pipeline: BridgePipeline?
        let heartbeats: LoopHeartbeats
    }

    /// Binds `host`:`port` and starts answering (`starting` until ``attach(_:)``: 200 on
    /// `/healthz`, 503 elsewhere).
    /// - Parameter stallThreshold: how long a loop may go without answering before `/healthz`
    ///   fails (default 30 s).
    /// - Throws: `PipelineError` naming `http.listen` when the address cannot be bound (in use,
    ///   not local) or the loop cannot start.
    public init(host: String, port: Int, limits: HTTP1ServerLimits = HTTP1ServerLimits(),
                stallThreshold: Duration = .seconds(30)) throws(PipelineError) {
        let loop: EventLoop
        do {
            loop = try EventLoop(name: "http-status")
        } catch {
            throw PipelineError(component: "http.listen", message: "\(error)")
        }
        let served = Locked<Served?>(nil)
        do {
            server = try HTTP1Server(host: host, port: port, loop: loop, limits: limits) { request in
                let current = served.withLock { $0 }
                guard let current, let pipeline = current.pipeline else {
                    // The process works (this loop answers) while the pipeline is made: a liveness
                    // probe must not restart it for starting; it is not ready yet.
                    return .text(request.path == "/healthz" ? 200 : 503, "starting")
                }
                return Self.answer(request, pipeline: pipeline, heartbeats: current.heartbeats, stallThreshold: stallThreshold)
            }
        } catch {
            loop.shutdown()
            throw PipelineError(component: "http.listen", message: "cannot listen on \(host):\(port): \(error)")
        }
        self.loop = loop
        self.served = served
        self.stallThreshold = stallThreshold
        self.port = server.port
        Logger(label: "bridge.http").info("serving /metrics, /healthz and /readyz", metadata: [
            "http.listen": "\(host):\(server.port)",
        ])
    }

    /// Binds and attaches `pipeline` at once.
    public convenience init(pipeline: BridgePipeline, host: String, port: Int,
                            limits: HTTP1ServerLimits = HTTP1ServerLimits(),
                            stallThreshold: Duration = .seconds(30)) throws(PipelineError) {
        try self.init(host: host, port: port, limits: limits, stallThreshold: stallThreshold)
        attach(pipeline)
    }

    /// Serves `pipeline`'s metrics, health and readiness from now on, and starts probing its
    /// event loops. Call once.
    public func attach(_ pipeline: BridgePipeline) {
        let heartbeats = LoopHeartbeats(
            loops: pipeline.eventLoops, probeLoop: loop,
            probeIntervalNanoseconds: min(1_000_000_000, stallThreshold.totalNanoseconds / 4))
        served.withLock { $0 = Served(pipeline: pipeline, heartbeats: heartbeats) }
        heartbeats.start()
    }

    /// Stops listening, closes every connection and stops the loop. Idempotent.
    public func close() {
        served.withLock { $0?.heartbeats.stop() }
        server.close()
        loop.shutdown()
    }

    private static func answer(_ request: HTTP1Request, pipeline: BridgePipeline, heartbeats: LoopHeartbeats,
                               stallThreshold: Duration) -> HTTP1Response {
        switch request.path {
        case "/metrics":
            return HTTP1Response(status: 200, contentType: PrometheusText.contentType,
                                 body: Array(pipeline.metrics.registry.render().utf8))
        case "/healthz":
            if let problem = heartbeats.stalledLoop(threshold: stallThreshold) { return .text(503, problem) }
            let consumerIdle = pipeline.nanosecondsSinceConsumerIteration
            if consumerIdle > stallThreshold.totalNanoseconds, pipeline.isConsuming {
                return .text(503, "the consumer loop has not polled for \(consumerIdle / 1_000_000_000)s")
            }
            return .text(200, "ok")
        case "/readyz":
            switch pipeline.readiness {
            case .ready: return .text(200, "ready")
            case .notReady(let reason): return .text(503, LogLineFormatter.escapingControlCharacters(reason))  // one line
            }
        case "/":
            return .text(200, "apns-bridge: GET /metrics, /healthz, /readyz")
        default:
            return .text(404, "not found: GET /metrics, /healthz or /readyz")
        }
    }
}

/// Proves that event loops answer: every probe interval the probe loop submits a task to each
/// watched loop, which records when it ran. A loop stuck in a callback stops recording.
final class LoopHeartbeats: Sendable {
    private let loops: [EventLoop]
    private let probeLoop: EventLoop
    private let lastRun: [Heartbeat]
    private let stopped = Atomic<Bool>(false)
    private let probeIntervalNanoseconds: UInt64

    private final class Heartbeat: Sendable {
        let nanoseconds = Atomic<UInt64>(Timestamp.monotonicNanoseconds())
    }

    init(loops: [EventLoop], probeLoop: EventLoop, probeIntervalNanoseconds: UInt64) {
        self.loops = loops
        self.probeLoop = probeLoop
        self.probeIntervalNanoseconds = max(1_000_000, probeIntervalNanoseconds)
        lastRun = loops.map { _ in Heartbeat() }
    }

    func start() {
        probeLoop.execute { [self] in probe() }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    private func probe() {
        guard !stopped.load(ordering: .relaxed) else { return }
        for (loop, heartbeat) in zip(loops, lastRun) {
            loop.execute { heartbeat.nanoseconds.store(Timestamp.monotonicNanoseconds(), ordering: .relaxed) }
        }
        probeLoop.schedule(afterNanoseconds: probeIntervalNanoseconds) { [self] in probe() }
    }

    /// A one-line description of the first loop that has not run a probe within `threshold`.
    func stalledLoop(threshold: Duration) -> String? {
        let now = Timestamp.monotonicNanoseconds()
        for (loop, heartbeat) in zip(loops, lastRun) {
            let last = heartbeat.nanoseconds.load(ordering: .relaxed)
            if now > last, now - last > threshold.totalNanoseconds {
                return "event loop \(loop.name) has not answered for \((now - last) / 1_000_000_000)s"
            }
        }
        return nil
    }
}
