#if canImport(Glibc)
import Glibc
#endif
import APNs
import Kafka
import APNsSimulator
import Bridge
import BridgeLocal
import Observability

/// `apns-bridge demo`: the whole path on this machine, on embedded defaults.
enum DemoCommand {
    static let help = """
    Usage: apns-bridge demo [--requests N] [--seconds S] [--log-level LEVEL]

    Starts librdkafka's mock Kafka cluster and the APNs simulator on 127.0.0.1, produces N sample
    requests (default 2000: fan-out with duplicates, unregistered and malformed tokens, expired and
    background pushes, broken JSON) spread over S seconds (default 5), runs the bridge until every
    result is in, and checks that every token got its expected outcome and every input offset was
    committed. A live line shows the rate, the notifications in flight and the outcomes so far
    (redrawn in place on a terminal, a plain line every 2 s otherwise); a table sums up the run.
    Exit 0 when everything matched.

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        let options = try CommandLineOptions(arguments, accepting: .init(valued: ["requests", "seconds", "log-level"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        let count = try options.integer("requests", default: 2000, in: 1...50_000)
        let seconds = try options.integer("seconds", default: 5, in: 0...60)
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
        say("producing \(workload.records.count) requests (\(workload.expectedResults) distinct tokens) to \(environment.requestTopic) over \(seconds) s")
        let isTerminal = isatty(1) == 1
        let display = Locked(DemoProgressDisplay(isTerminal: isTerminal) { CommandLineInterface.write($0, to: 1) })
        let report = try DemoRunner.run(
            workload: workload, environment: environment, configuration: try environment.configuration(),
            produceOver: .seconds(seconds), progressInterval: isTerminal ? .milliseconds(200) : .seconds(1),
            progress: { snapshot in display.withLock { $0.update(snapshot) } }
        )
        display.withLock { $0.finish() }
        say("")
        CommandLineInterface.write(DemoProgressDisplay.table(report), to: 1)
        for mismatch in report.mismatches.prefix(20) {
            say("MISMATCH \(mismatch)")
        }
        say("")
        say(report.isComplete ? "every token got its expected result; every offset was committed" : "the demo did NOT complete as expected")
        return report.isComplete ? 0 : 1
    }

    private static func say(_ line: String) {
        CommandLineInterface.write(line + "\n", to: 1)
    }
}
