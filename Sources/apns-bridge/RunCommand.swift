import Bridge
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Observability
import Synchronization

/// `apns-bridge run`: the service. SIGTERM/SIGINT drain, commit and exit 0.
enum RunCommand {
    static let help = """
    Usage: apns-bridge run [--config FILE]

    Consumes push requests from Kafka, sends them to APNs and publishes a result for every token.
    Serves GET /metrics (Prometheus), /healthz and /readyz on http.listen (default 127.0.0.1:9464).
    FILE defaults to $APNS_BRIDGE_CONFIG, then config/bridge.yaml. SIGTERM or SIGINT stops fetching,
    drains in-flight work within shutdown_timeout, commits and exits 0.

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        // First, while this is the only thread: a stop signal from now on waits for the waiter.
        SignalWaiter.blockStopSignals()
        let options = try CommandLineOptions(arguments, accepting: .init(valued: ["config"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        // Listening before the setup: a signal during it stops the pipeline as soon as it exists.
        let stop = StopOnSignal()
        _ = try SignalWaiter { signalNumber, count in stop.received(signalNumber, count: count) }
        // The configuration as loaded holds the passphrases: it lives only until the pipeline has
        // loaded the credentials, which keeps the configuration without them.
        // The status listener is bound before any Kafka client exists, so an unusable http.listen
        // stops the process before it could join the consumer group.
        let (statusServer, pipeline, certificateFindings) = try { () throws -> (BridgeStatusServer, BridgePipeline, [ConfigurationFinding]) in
            let loaded = try CommandLineInterface.loadConfiguration(options)
            // A misspelt or refused librdkafka property is named by its key, as `check` names it.
            try ConfigurationCheck.validateKafkaProperties(loaded)
            // Read while the passphrases are at hand (a PKCS#12 file needs its own).
            let findings = ConfigurationCheck.certificateValidityFindings(loaded, now: Timestamp.nowMilliseconds() / 1000)
            let server = try BridgeStatusServer(host: loaded.http.host, port: loaded.http.port)
            do {
                return (server, try BridgePipeline(configuration: loaded), findings)
            } catch {
                server.close()
                throw error
            }
        }()
        defer { statusServer.close() }
        statusServer.attach(pipeline)
        let configuration = pipeline.configuration
        let logger = Logger(label: "apns-bridge")
        for finding in ConfigurationCheck.keyFileModeWarnings(configuration) {
            logger.warning("key file readable by group or others", metadata: ["key": finding.subject, "detail": finding.message])
        }
        for finding in certificateFindings {
            if finding.severity == .error {
                logger.error("certificate not valid: APNs will refuse the connections", metadata: ["key": finding.subject, "detail": finding.message])
            } else {
                logger.warning("certificate expires soon", metadata: ["key": finding.subject, "detail": finding.message])
            }
        }
        let (timeoutSeconds, timeoutAttoseconds) = configuration.shutdownTimeout.components
        stop.attach(pipeline, graceSeconds: Double(timeoutSeconds) + Double(timeoutAttoseconds) / 1e18 + 5)
        let exitCode = pipeline.run()
        if pipeline.isConsumerClosingInBackground {
            // librdkafka's threads still wait for the group coordinator: the process exits
            // without its exit handlers (OpenSSL's cleanup among them), which must not run under them.
            LoggingSystem.flush()
            _exit(exitCode)
        }
        return exitCode
    }
}

/// What a stop signal does in `run`: the first asks the pipeline to drain and stop (remembered
/// until the pipeline exists, when it arrives during the setup) and starts a watchdog for the
/// grace period; a second exits at once, leaving unfinished offsets uncommitted.
private final class StopOnSignal: Sendable {
    private struct State {
        var requested = false
        // Weak: the pipeline goes on the main thread before `main` returns, never on the
        // signal thread while the process exits and the libraries tear down their locks.
        weak var pipeline: BridgePipeline?
        var graceSeconds: Double?
    }

    private let state = Mutex(State())
    private let logger = Logger(label: "apns-bridge")

    /// The signal thread: `count` signals so far, this one included.
    func received(_ signalNumber: Int32, count: Int) {
        guard count == 1 else {
            logger.warning("second signal: exiting without draining", metadata: ["signal": "\(signalNumber)"])
            _exit(1)
        }
        logger.info("stopping on signal", metadata: ["signal": "\(signalNumber)"])
        let (pipeline, graceSeconds) = state.withLock { state in
            state.requested = true
            return (state.pipeline, state.graceSeconds)
        }
        pipeline?.requestStop()
        if let graceSeconds { startWatchdog(graceSeconds) }
    }

    /// The pipeline exists; it stops at once if a signal came first. Exactly one of this and
    /// `received` sees the other's state, so the watchdog starts once.
    func attach(_ pipeline: BridgePipeline, graceSeconds: Double) {
        let requested = state.withLock { state in
            state.pipeline = pipeline
            state.graceSeconds = graceSeconds
            return state.requested
        }
        if requested {
            pipeline.requestStop()
            startWatchdog(graceSeconds)
        }
    }

    /// Kafka or APNs may not answer at all while draining: never outlive the grace period.
    private func startWatchdog(_ graceSeconds: Double) {
        let logger = logger
        DispatchQueue.global().asyncAfter(deadline: .now() + graceSeconds) {
            logger.error("shutdown took longer than shutdown_timeout; exiting without a clean stop")
            _exit(1)
        }
    }
}
