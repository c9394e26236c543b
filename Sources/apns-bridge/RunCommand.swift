import Bridge
import Observability

/// `apns-bridge run`: the service. SIGTERM/SIGINT drain, commit and exit 0.
enum RunCommand {
    static let help = """
    Usage: apns-bridge run [--config FILE]

    Consumes push requests from Kafka, sends them to APNs and publishes a result for every token.
    FILE defaults to $APNS_BRIDGE_CONFIG, then config/bridge.yaml. SIGTERM or SIGINT stops fetching,
    drains in-flight work within shutdown_timeout, commits and exits 0.

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        let options = try CommandLineOptions(arguments, accepting: .init(valued: ["config"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        let configuration = try CommandLineInterface.loadConfiguration(options)
        let pipeline = try BridgePipeline(configuration: configuration)
        let logger = Logger(label: "apns-bridge")
        let signals = SignalWaiter { signalNumber in
            logger.info("stopping on signal", metadata: ["signal": "\(signalNumber)"])
            pipeline.requestStop()
        }
        let exitCode = pipeline.run()
        withExtendedLifetime(signals) {}
        return exitCode
    }
}
