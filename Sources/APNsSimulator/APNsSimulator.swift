import APNs
import HTTP2
import Observability
import Synchronization

/// A local APNs look-alike: TLS + HTTP/2 (`HTTP2Server`) answering `POST /3/device/<token>` with
/// `APNsSimulatorRules`. For tests, the demo and the benchmark; never for production traffic.
///
/// Lifecycle: `init` loads keys, `start()` binds and serves, `port` tells the bound port,
/// `close()` stops serving and joins the loop threads (idempotent).
///
/// Faults (``APNsSimulatorFaults``: latency, GOAWAY, dropped and half-open connections, failure
/// rates, stalls, token age and update limits, a low initial stream limit) come from the
/// configuration and can be changed at run time with ``setFaults(_:)``; ``statistics`` tells what
/// the simulator saw. Client-certificate auth is on when the configuration names a client CA.
public final class APNsSimulator: Sendable {
    /// A test's own answer for a request instead of the rules' (nil: the rules answer). An
    /// overridden request passes no authentication, so it does not raise an initial stream limit.
    public typealias AnswerOverride = @Sendable (APNsSimulatorRequest) -> APNsSimulatorAnswer?

    /// The settings it was created with (its `faults` are the initial ones).
    public let configuration: APNsSimulatorConfiguration
    /// The rules that answer each request.
    public let rules: APNsSimulatorRules
    private let handler: APNsSimulatorHandler
    private let running = Locked<Running?>(nil)
    private let logger = Logger(label: "apns.simulator")

    private struct Running: @unchecked Sendable {   // HTTP2Server and EventLoopGroup are thread-safe
        let group: EventLoopGroup
        let server: HTTP2Server
    }

    /// The bytes of a request body the simulator keeps: one more than Apple's largest payload
    /// (VoIP, 5120 bytes), so no cut body passes for a valid one. The rest is only counted, and
    /// the rules answer such a body 413 PayloadTooLarge.
    public static let keptBodyBytes = (APNsPushType.allCases.map(\.maximumPayloadBytes).max() ?? 5120) + 1

    /// Creates a simulator; `clock` (Unix seconds) decides provider-token age and token switches.
    /// - Throws: ``APNsKeyError`` for a bad trusted key, ``APNsSimulatorError`` for unusable faults.
    public init(
        configuration: APNsSimulatorConfiguration,
        clock: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() / 1000 },
        answerOverride: AnswerOverride? = nil
    ) throws {
        if let problem = configuration.faults.problem { throw APNsSimulatorError.invalidFaults(problem) }
        self.configuration = configuration
        self.rules = try configuration.makeRules(clock: clock)
        self.handler = APNsSimulatorHandler(rules: rules, faults: configuration.faults, answerOverride: answerOverride)
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
                let server = try HTTP2Server(host: configuration.host, port: configuration.port, tls: tls, group: group,
                                             maxConcurrentStreams: configuration.maxConcurrentStreams,
                                             maxConnections: configuration.maxConnections ?? HTTP2Server.defaultMaxConnections,
                                             requestBodyLimit: .truncate(after: Self.keptBodyBytes), handler: handler)
                server.setInitialMaxConcurrentStreams(handler.currentFaults.initialMaxConcurrentStreams)
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

    /// Connections accepted and not closed yet, half-open ones included (0 when not running). Any thread.
    public var openConnections: Int {
        running.withLock { $0?.server.openConnectionCount ?? 0 }
    }

    /// Announces a new SETTINGS_MAX_CONCURRENT_STREAMS on every open connection.
    public func setMaxConcurrentStreams(_ value: Int) {
        running.withLock { $0?.server.setMaxConcurrentStreams(value) }
    }

    /// Replaces the faults; streams received afterwards follow them (a new initial stream limit
    /// applies to connections accepted afterwards). Any thread.
    /// - Throws: ``APNsSimulatorError/invalidFaults(_:)`` (the faults in force stay).
    public func setFaults(_ faults: APNsSimulatorFaults) throws(APNsSimulatorError) {
        if let problem = faults.problem { throw .invalidFaults(problem) }
        running.withLock { running in
            handler.currentFaults = faults
            running?.server.setInitialMaxConcurrentStreams(faults.initialMaxConcurrentStreams)
        }
    }

    /// The faults in force. Any thread.
    public var faults: APNsSimulatorFaults { handler.currentFaults }

    /// What the simulator saw and did so far. Any thread.
    public var statistics: APNsSimulatorStatistics { handler.currentStatistics }

    /// Starts counting afresh (e.g. the peak of open streams after changing the limit). Any thread.
    public func resetStatistics() {
        handler.resetStatistics()
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

/// Why a simulator cannot be set up as asked.
public enum APNsSimulatorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The faults are unusable; the text says which and why.
    case invalidFaults(String)

    public var description: String {
        switch self {
        case .invalidFaults(let problem): "invalid simulator faults: \(problem)"
        }
    }
}
