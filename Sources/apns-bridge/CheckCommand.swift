import APNs
import Bridge

/// `apns-bridge check`: validates a configuration and loads every app's credentials.
enum CheckCommand {
    static let help = """
    Usage: apns-bridge check [--config FILE]

    Parses the configuration (exit 2 naming the key on an error), has librdkafka check every
    kafka.consumer / kafka.producer property (without connecting) and loads every app's key or
    certificate files. Prints a summary and exits 0 when everything is usable.

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        let options = try CommandLineOptions(arguments, accepting: .init(valued: ["config"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        let configuration = try CommandLineInterface.loadConfiguration(options)
        try ConfigurationCheck.validateKafkaProperties(configuration)
        try ConfigurationCheck.loadCredentials(configuration)
        var summary = "configuration OK\n"
        summary += "  kafka: \(configuration.kafka.brokers), group \(configuration.kafka.groupID), topics \(configuration.kafka.topics.joined(separator: ", "))\n"
        for app in configuration.apps {
            summary += "  app \(app.name): \(app.bundleID), \(app.environment.rawValue), \(app.connections) connection(s), \(app.auth)\n"
        }
        CommandLineInterface.write(summary, to: 1)
        return 0
    }
}
