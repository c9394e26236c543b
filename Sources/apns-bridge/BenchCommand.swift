#if canImport(Glibc)
import Glibc
#endif
import Bridge
import BridgeLocal
import Observability

/// `apns-bridge bench`: the bridge end to end on this machine, against the bundled simulator,
/// next to the ceiling h2load measures for the same simulator.
enum BenchCommand {
    static let help = """
    Usage: apns-bridge bench [--requests N] [--tokens-per-request K] [--instances I] [--rate R]
                             [--partitions P] [--connections C] [--max-in-flight M]
                             [--simulator-threads T] [--simulator-latency MS] [--simulator-streams S]
                             [--exactly-once] [--skip-h2load] [--rounds H] [--skip-paced]
                             [--consumer-property K=V …] [--wrapper 'COMMAND …'] [--json]
                             [--log-level LEVEL]
           apns-bridge bench --targets [--requests N] [--rounds H] [--wrapper 'COMMAND …'] [--json]
                             [--log-level LEVEL]
           apns-bridge bench --memory [--requests N] [--tokens-per-request K] [--single-token-requests S]
                             [--max-in-flight M] [--outage-seconds T]

    Starts librdkafka's mock Kafka cluster (with Nagle's algorithm off on its brokers' sockets, as
    on Kafka's brokers; the mock leaves it on) and the APNs simulator on 127.0.0.1, starts I
    `apns-bridge run` processes in one consumer group, warms them up, and runs:
      H rounds    each, while the bridge processes are stopped (SIGSTOP), h2load against the
                  simulator (C connections, 100 streams each, the same notification count capped
                  at 200,000; its CPU time from wait4), then the peak run: N requests of K
                  distinct valid tokens, produced at once while the bridge is still stopped and
                  drained as a backlog once it continues; throughput over the window from the
                  first result to the last, the bridge processes' CPU per notification next to
                  h2load's CPU per request of the same round, per instance rate and CPU. The
                  figures are the round's of median share of h2load (of median rate without it);
      paced run   N more requests produced at R requests/s (default: half the median round's peak);
                  p50/p99 of the time the bridge adds (result record's Kafka timestamp minus the
                  request record's).
    Then SIGTERM (drain, commit) and a check of every result and committed offset. Exit 0 when
    every notification was delivered once, every offset committed and every instance exited 0;
    1 otherwise; 2 on a usage error.

      --requests N             requests per run (default 100000)
      --tokens-per-request K   distinct tokens per request (default 1; e.g. 5 for fan-out)
      --instances I            `apns-bridge run` processes in the group (default 1)
      --rate R                 requests/s of the paced run (default: half the measured peak)
      --partitions P           partitions of every topic (default 8; raised when the mock cluster's
                               limit of 5 MB / 100,000 records per partition requires it for one
                               run's records)
      --connections C          HTTP/2 connections of the app per instance (default 4; h2load uses as many)
      --max-in-flight M        the bridge's limits.max_in_flight (default 20000)
      --simulator-threads T    event loop threads of the simulator (default 1)
      --simulator-latency MS   the simulator answers each stream MS milliseconds late (APNs' round
                               trip; default 0)
      --simulator-streams S    the simulator's SETTINGS_MAX_CONCURRENT_STREAMS (default 1000; the
                               bridge opens at most 1000 streams per connection)
      --exactly-once           run the bridge with kafka.exactly_once: true (transactions)
      --skip-h2load            do not run the h2load reference
      --rounds H               peak rounds, each h2load then the bridge (default 3; 1 for profiling)
      --skip-paced             do not run the paced run
      --consumer-property K=V  add a librdkafka property to the instances' kafka.consumer (repeatable;
                               the bench sets fetch.wait.max.ms=1: librdkafka's mock broker holds an
                               empty fetch for all of it even when records arrive)
      --wrapper 'COMMAND …'    start each instance under COMMAND (split at spaces), e.g.
                               'valgrind --tool=callgrind' for instruction counts (profiling only:
                               the instance's CPU and memory are then the wrapper's)
      --json                   only the JSON line on standard output (progress and summary on standard error)
      --log-level LEVEL        the instances' log level: trace, debug, info, warning (default) or error

    With --targets it makes the seven runs that measure the performance targets of
    docs/BENCHMARKS.md, one after the other (each as `bench` with the options shown): single token;
    --tokens-per-request 5 with a fifth of the requests; --skip-h2load --skip-paced with
    --max-in-flight 5000 and 100000, with --simulator-latency 50 --simulator-streams 500
    --connections 2, and as it is and with --exactly-once. It prints each run's summary, then
    every target as met, NOT MET or not measured (a run that did not complete measures nothing)
    with its figure; with --json one line holds the verdicts and every run's JSON. Exit 0 when
    every run completed, whether or not the targets were met; 1 otherwise.

    With --memory it measures the resident memory of a real `apns-bridge run` child process
    instead (docs/BENCHMARKS.md): a backlog of N requests of K tokens (default 200 × 5,000) plus
    S single-token requests (default 50,000) waits while APNs is unreachable for T seconds
    (default 15), then APNs comes back and the bridge catches up. VmRSS is sampled every 100 ms;
    exit 0 when everything was committed, the bridge stopped cleanly and its peak RSS (VmHWM)
    stayed within 256 MB.

    """

    /// The most partitions the benchmark creates.
    static let maximumPartitions = 512

    static func main(_ arguments: [String]) throws -> Int32 {
        let options = try CommandLineOptions(arguments, accepting: .init(
            valued: ["requests", "tokens-per-request", "partitions", "connections", "max-in-flight",
                     "simulator-threads", "log-level", "single-token-requests", "outage-seconds", "instances", "rate", "consumer-property", "wrapper",
                     "simulator-latency", "simulator-streams", "rounds"],
            flags: ["help", "skip-h2load", "memory", "targets", "exactly-once", "skip-paced", "json"]
        ))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        if options.flag("targets") {  // first: its own list of options refuses --memory
            return try targets(options)
        }
        if options.flag("memory") {
            return try memory(options)
        }
        let levelName = try logLevel(options)
        var pacedRate: Double?
        if let text = options.value("rate") {
            guard let rate = Double(text), rate >= 1, rate <= 10_000_000 else {
                throw CommandLineOptions.UsageError(description: "--rate must be a number of requests per second from 1 to 10,000,000, got '\(text)'")
            }
            pacedRate = rate
        }
        var settings = BenchmarkSettings(
            requests: try options.integer("requests", default: 100_000, in: 1...1_000_000),
            tokensPerRequest: try options.integer("tokens-per-request", default: 1, in: 1...100),
            partitions: try options.integer("partitions", default: 8, in: 1...maximumPartitions),
            connections: try options.integer("connections", default: 4, in: 1...64),
            maxInFlight: try options.integer("max-in-flight", default: 20_000, in: 1...1_000_000),
            simulatorThreads: try options.integer("simulator-threads", default: 1, in: 1...64),
            runH2Load: !options.flag("skip-h2load"),
            exactlyOnce: options.flag("exactly-once"),
            instances: try options.integer("instances", default: 1, in: 1...8),
            runPaced: !options.flag("skip-paced"),
            pacedRate: pacedRate,
            executable: currentExecutable(),
            bridgeLogLevel: levelName
        )
        guard settings.notifications <= 2_000_000 else {
            throw CommandLineOptions.UsageError(description: "--requests × --tokens-per-request must be at most 2,000,000, got \(settings.notifications)")
        }
        settings.simulatorLatencyMilliseconds = try options.integer("simulator-latency", default: 0, in: 0...10_000)
        settings.simulatorStreams = try options.integer("simulator-streams", default: 1000, in: 1...100_000)
        settings.rounds = try options.integer("rounds", default: 3, in: 1...9)
        settings.wrapper = wrapper(options)
        for property in options.values("consumer-property") {
            let parts = property.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
                  parts.allSatisfy({ $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "." || $0 == "_" || $0 == "-" } }) else {
                throw CommandLineOptions.UsageError(description: "--consumer-property takes KEY=VALUE (a librdkafka consumer property), got '\(property)'")
            }
            settings.consumerProperties[parts[0]] = parts[1]
        }
        LoggingSystem.bootstrap(level: .warning, format: .text)
        // With --json only the JSON line goes to standard output.
        let textOutput: Int32 = options.flag("json") ? 2 : 1

        let workload = BenchmarkWorkload(requests: settings.requests, tokensPerRequest: settings.tokensPerRequest)
        try fitPartitions(&settings, for: workload, textOutput: textOutput)
        let report = try BenchmarkRunner.run(settings: settings, workload: workload, progress: { say($0, to: textOutput) })
        for line in report.summary {
            say(line, to: textOutput)
        }
        say(report.jsonLine)
        return report.isComplete ? 0 : 1
    }

    /// The instances' log level (`--log-level`, default warning).
    static func logLevel(_ options: CommandLineOptions) throws -> String {
        let levelName = options.value("log-level") ?? "warning"
        guard Logger.Level(name: levelName) != nil else {
            throw CommandLineOptions.UsageError(description: "--log-level must be trace, debug, info, warning or error")
        }
        return levelName
    }

    /// The command each instance starts under (`--wrapper`, split at spaces), or none.
    static func wrapper(_ options: CommandLineOptions) -> [String] {
        (options.value("wrapper") ?? "").split(separator: " ").map(String.init)
    }

    /// Raises `settings.partitions` to what `workload` needs in librdkafka's mock cluster (with a
    /// note), or refuses a run that would need more than `maximumPartitions`.
    static func fitPartitions(_ settings: inout BenchmarkSettings, for workload: BenchmarkWorkload,
                              textOutput: Int32) throws {
        let needed = BenchmarkRunner.partitionsNeeded(for: workload, instances: settings.instances)
        guard needed <= maximumPartitions else {
            throw CommandLineOptions.UsageError(description: "\(settings.notifications) notifications need \(needed) partitions of the mock cluster (at most \(maximumPartitions)): lower --requests or --tokens-per-request")
        }
        if needed > settings.partitions {
            say("note: partitions raised from \(settings.partitions) to \(needed): librdkafka's mock cluster keeps at most 5 MB or 100,000 records per partition and silently drops older ones (one run's records must fit)", to: textOutput)
            settings.partitions = needed
        }
    }

    /// `bench --memory`.
    private static func memory(_ options: CommandLineOptions) throws -> Int32 {
        LoggingSystem.bootstrap(level: .warning, format: .text)
        var settings = MemoryBenchmark.Settings(executable: currentExecutable())
        settings.largeRequests = try options.integer("requests", default: 200, in: 0...10_000)
        settings.tokensPerLargeRequest = try options.integer("tokens-per-request", default: 5_000, in: 1...10_000)
        settings.singleTokenRequests = try options.integer("single-token-requests", default: 50_000, in: 0...1_000_000)
        settings.maxInFlight = try options.integer("max-in-flight", default: 20_000, in: 1...1_000_000)
        settings.outageSeconds = Double(try options.integer("outage-seconds", default: 15, in: 1...3_600))
        let report = try MemoryBenchmark.run(settings: settings, progress: { say($0) })
        for line in report.summary {
            say(line)
        }
        return report.isWithinTarget ? 0 : 1
    }

    /// This binary's path, for starting `apns-bridge run` as a child.
    static func currentExecutable() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    static func say(_ line: String, to descriptor: Int32 = 1) {
        CommandLineInterface.write(line + "\n", to: descriptor)
    }
}
