import APNs
import Kafka
import APNsSimulator
import Bridge
import Observability

/// `apns-bridge demo`: the whole path on this machine, on embedded defaults.
enum DemoCommand {
    static let help = """
    Usage: apns-bridge demo [--requests N] [--log-level LEVEL]

    Starts librdkafka's mock Kafka cluster and the APNs simulator on 127.0.0.1, produces N sample
    requests (default 300: fan-out with duplicates, unregistered and malformed tokens, expired and
    background pushes, broken JSON), runs the bridge until every result is in, prints a summary by
    outcome and checks that every input offset was committed. Exit 0 when everything matched.

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        let options = try CommandLineOptions(arguments, accepting: .init(valued: ["requests", "log-level"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        let count = try options.integer("requests", default: 300, in: 1...50_000)
        let levelName = options.value("log-level") ?? "warning"
        guard let level = Logger.Level(name: levelName) else {
            throw CommandLineOptions.UsageError(description: "--log-level must be trace, debug, info, warning or error")
        }
        LoggingSystem.bootstrap(level: level, format: .text)

        let workload = DemoWorkload(count: count)
        say("starting the mock Kafka cluster and the APNs simulator on 127.0.0.1")
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        say("kafka \(environment.kafka.bootstrapServers), APNs simulator https://127.0.0.1:\(environment.simulator.port)")
        say("producing \(workload.records.count) requests (\(workload.expectedResults) distinct tokens) to \(environment.requestTopic)")
        let report = try DemoRunner.run(
            workload: workload, environment: environment, configuration: try environment.configuration(),
            progress: { say("  \($0)") }
        )
        say("done in \(String(format2: report.seconds)) s")
        say("results: \(report.results)")
        for outcome in PushOutcome.allCases {
            say("  \(outcome.rawValue): \(report.outcomes[outcome, default: 0])")
        }
        say("invalid-token records: \(report.invalidTokens), dead letters: \(report.deadLetters)")
        say("committed offsets: \(report.committedRecords) of \(report.producedRecords) requests; bridge exit code \(report.pipelineExitCode)")
        for mismatch in report.mismatches.prefix(20) {
            say("MISMATCH \(mismatch)")
        }
        say(report.isComplete ? "every token got its expected result" : "the demo did NOT complete as expected")
        return report.isComplete ? 0 : 1
    }

    private static func say(_ line: String) {
        CommandLineInterface.write(line + "\n", to: 1)
    }
}

extension String {
    /// A number with two decimals, without Foundation.
    init(format2 value: Double) {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        self = "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
