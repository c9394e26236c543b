import Bridge
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Observability

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
        let options = try CommandLineOptions(arguments, accepting: .init(valued: ["config"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
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
        let graceSeconds = Double(timeoutSeconds) + Double(timeoutAttoseconds) / 1e18 + 5
        // The pipeline is held weakly: the handler's block is released by libdispatch on one of
        // its threads, possibly while the process exits, and the pipeline's last release there
        // would tear down its clients and TLS contexts while the exit handlers tear down the
        // libraries' locks (under ThreadSanitizer, a crash in a lock's release from the block's
        // disposal). Held only here, the pipeline goes on this thread before `main` returns.
        let signals = SignalWaiter { [weak pipeline] signalNumber, count in
            guard count == 1 else {
                // A second signal: stop now. Unfinished offsets stay uncommitted.
                logger.warning("second signal: exiting without draining", metadata: ["signal": "\(signalNumber)"])
                _exit(1)
            }
            logger.info("stopping on signal", metadata: ["signal": "\(signalNumber)"])
            pipeline?.requestStop()
            // Kafka or APNs may not answer at all while draining: never outlive the grace period.
            DispatchQueue.global().asyncAfter(deadline: .now() + graceSeconds) {
                logger.error("shutdown took longer than shutdown_timeout; exiting without a clean stop")
                _exit(1)
            }
        }
        let exitCode = pipeline.run()
        withExtendedLifetime(signals) {}
        return exitCode
    }
}
