import APNs
import HTTP2
import Observability
import Synchronization

/// A local APNs look-alike: TLS + HTTP/2 (`HTTP2Server`) answering `POST /3/device/<token>` with
/// `APNsSimulatorRules`. For tests, the demo and the benchmark; never for production traffic.
///
/// Lifecycle: `init` loads keys, `start()` binds and serves, `port` tells the bound port,
/// `close()` stops serving and joins the loop threads (idempotent).
public final class APNsSimulator: Sendable {
    /// Fault injection (a later issue): return an answer to send instead of the rules' answer, or nil.
    public typealias FaultHook = @Sendable (APNsSimulatorRequest) -> APNsSimulatorAnswer?

    /// The settings it was created with.
    public let configuration: APNsSimulatorConfiguration
    /// The rules that answer each request.
    public let rules: APNsSimulatorRules
    private let faults: FaultHook?
    private let running = Locked<Running?>(nil)
    private let logger = Logger(label: "apns.simulator")

    private struct Running: @unchecked Sendable {   // HTTP2Server and EventLoopGroup are thread-safe
        let group: EventLoopGroup
        let server: HTTP2Server
    }

    /// Creates a simulator; `clock` (Unix seconds) decides provider-token expiry.
    public init(
        configuration: APNsSimulatorConfiguration,
        clock: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() / 1000 },
        faults: FaultHook? = nil
    ) throws {
        self.configuration = configuration
        self.rules = try configuration.makeRules(clock: clock)
        self.faults = faults
    }

    /// Binds the listening socket and starts serving. Throws when TLS files or the address are bad.
    public func start() throws {
        try running.withLock { running in
            guard running == nil else { return }
            let tls = try TLSServerContext(certificateFile: configuration.certificateFile,
                                           privateKeyFile: configuration.privateKeyFile,
                                           clientCAFile: configuration.clientCAFile)
            let group = try EventLoopGroup(threads: max(1, configuration.threads), name: "apns-simulator")
            do {
                let handler = APNsSimulatorHandler(rules: rules, faults: faults)
                let server = try HTTP2Server(host: configuration.host, port: configuration.port, tls: tls, group: group,
                                             maxConcurrentStreams: configuration.maxConcurrentStreams, handler: handler)
                running = Running(group: group, server: server)
            } catch {
                group.shutdown()
                throw error
            }
        }
        logger.info("APNs simulator listening", metadata: ["host": configuration.host, "port": String(port)])
    }

    /// The bound port (0 before `start()` and after `close()`).
    public var port: Int {
        running.withLock { $0?.server.port ?? 0 }
    }

    /// Announces a new SETTINGS_MAX_CONCURRENT_STREAMS on every open connection.
    public func setMaxConcurrentStreams(_ value: Int) {
        running.withLock { $0?.server.setMaxConcurrentStreams(value) }
    }

    /// Stops serving, closes connections and joins the loop threads. Idempotent.
    public func close() {
        guard let stopped = running.withLock({ running -> Running? in
            defer { running = nil }
            return running
        }) else { return }
        stopped.server.close()
        stopped.group.shutdown()
    }
}

/// Bridges `HTTP2ServerHandler` to the rules: one call per stream, answered at once on the loop thread.
final class APNsSimulatorHandler: HTTP2ServerHandler {
    private let rules: APNsSimulatorRules
    private let faults: APNsSimulator.FaultHook?

    init(rules: APNsSimulatorRules, faults: APNsSimulator.FaultHook?) {
        self.rules = rules
        self.faults = faults
    }

    func handle(_ request: HTTP2ServerRequest, responder: HTTP2Responder) {
        let simulated = APNsSimulatorRequest(method: request.method, path: request.path,
                                             headers: request.headers, body: request.body)
        // HTTP2ServerHandler does not identify the connection, so each request is judged with a fresh
        // connection state (no team binding, no client certificate): a hook for certificate auth later.
        var connection = APNsConnectionAuthState()
        let answer = faults?(simulated) ?? rules.answer(simulated, connection: &connection)
        responder.respond(status: answer.status, headers: answer.headers, body: answer.body)
    }
}
