import Bridge
import BridgeLocal
import Observability

extension BenchCommand {
    /// Options `bench --targets` takes: the rest are the seven runs' own settings.
    static let targetsOptions: Set<String> = ["targets", "requests", "rounds", "wrapper", "json", "log-level"]

    /// `bench --targets`: the seven runs of `BenchmarkTargets`, then every target's verdict.
    static func targets(_ options: CommandLineOptions) throws -> Int32 {
        if let other = options.givenNames.subtracting(targetsOptions).sorted().first {
            throw CommandLineOptions.UsageError(description: "--targets makes its own seven runs: --\(other) does not apply (it takes --requests, --rounds, --wrapper, --json and --log-level)")
        }
        var base = BenchmarkSettings(
            requests: try options.integer("requests", default: 100_000, in: 5...1_000_000),
            executable: currentExecutable(),
            bridgeLogLevel: try logLevel(options)
        )
        base.rounds = try options.integer("rounds", default: 3, in: 1...9)
        base.wrapper = wrapper(options)
        LoggingSystem.bootstrap(level: .warning, format: .text)
        let textOutput: Int32 = options.flag("json") ? 2 : 1

        let runs = BenchmarkTargets.runs(base: base)
        var reports: [BenchmarkTargets.RunName: BenchmarkReport] = [:]
        for (index, run) in runs.enumerated() {
            say("== run \(index + 1) of \(runs.count): \(run.name.rawValue) (\(run.command))", to: textOutput)
            var settings = run.settings
            let workload = BenchmarkWorkload(requests: settings.requests, tokensPerRequest: settings.tokensPerRequest)
            do {
                try fitPartitions(&settings, for: workload, textOutput: textOutput)
                let report = try BenchmarkRunner.run(settings: settings, workload: workload, progress: { say($0, to: textOutput) })
                for line in report.summary {
                    say(line, to: textOutput)
                }
                reports[run.name] = report
            } catch {
                // A run that cannot start leaves its targets unmeasured; the others still run.
                say("run \(run.name.rawValue) failed: \(error)", to: textOutput)
            }
        }
        let verdicts = BenchmarkTargets.verdicts(reports)
        say("== the targets", to: textOutput)
        for line in BenchmarkTargets.summary(verdicts) {
            say(line, to: textOutput)
        }
        say(BenchmarkTargets.jsonLine(runs: runs, reports: reports, verdicts: verdicts))
        return runs.allSatisfy({ reports[$0.name]?.isComplete == true }) ? 0 : 1
    }
}
