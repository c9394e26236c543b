import Bridge
import Observability

/// The performance targets of docs/BENCHMARKS.md as one measurement: the seven bench runs
/// `apns-bridge bench --targets` makes one after the other, and each target's verdict from
/// their reports.
public enum BenchmarkTargets {
    /// One of the seven runs.
    public enum RunName: String, CaseIterable, Sendable {
        // The rate, CPU and p99 runs; the two compared with each other; the latency run; the two
        // compared for exactly once.
        case singleToken = "single token", fanOut = "5-token fan-out"
        case maxInFlight5000 = "max_in_flight 5000", maxInFlight100000 = "max_in_flight 100000"
        case slowAPNs = "50 ms APNs latency"
        case atLeastOnce = "at least once", exactlyOnce = "exactly once"
    }

    /// A run: its name, its settings, and the `apns-bridge bench` options that make the same run.
    public struct Run: Sendable {
        public let name: RunName
        public let settings: BenchmarkSettings
        public let options: String
    }

    /// The simulated APNs round trip of the slow-APNs run, and its connections and streams.
    static let slowAPNsLatencyMilliseconds = 50
    static let slowAPNsConnections = 2
    static let slowAPNsStreams = 500
    /// Tokens per request of the fan-out run.
    static let fanOutTokens = 5

    /// The seven runs, in order. `base` gives what every run shares (requests per run, rounds,
    /// the executable, wrapper and log level); the fan-out run sends a fifth of the requests, five
    /// tokens each, so that every run carries as many notifications.
    public static func runs(base: BenchmarkSettings) -> [Run] {
        var common = base
        common.tokensPerRequest = 1
        common.runH2Load = true
        common.runPaced = true
        common.exactlyOnce = false
        common.instances = 1
        let defaults = BenchmarkSettings(executable: base.executable)
        return RunName.allCases.map { name in
            var settings = common
            var options: [String] = []
            if name != .singleToken && name != .fanOut {
                // Rate only: neither the h2load reference nor the paced run is part of the target.
                settings.runH2Load = false
                settings.runPaced = false
                options = ["--skip-h2load", "--skip-paced"]
            }
            switch name {
            case .singleToken, .atLeastOnce:
                break
            case .fanOut:
                settings.requests = max(1, common.requests / fanOutTokens)
                settings.tokensPerRequest = fanOutTokens
                options = ["--tokens-per-request", "\(fanOutTokens)"]
            case .maxInFlight5000, .maxInFlight100000:
                settings.maxInFlight = name == .maxInFlight5000 ? 5_000 : 100_000
                options += ["--max-in-flight", "\(settings.maxInFlight)"]
            case .slowAPNs:
                settings.simulatorLatencyMilliseconds = slowAPNsLatencyMilliseconds
                settings.simulatorStreams = slowAPNsStreams
                settings.connections = slowAPNsConnections
                options += ["--simulator-latency", "\(slowAPNsLatencyMilliseconds)", "--simulator-streams",
                            "\(slowAPNsStreams)", "--connections", "\(slowAPNsConnections)"]
            case .exactlyOnce:
                settings.exactlyOnce = true
                options += ["--exactly-once"]
            }
            let requests = settings.requests == defaults.requests ? [] : ["--requests", "\(settings.requests)"]
            let rounds = settings.rounds == defaults.rounds ? [] : ["--rounds", "\(settings.rounds)"]
            return Run(name: name, settings: settings, options: (requests + options + rounds).joined(separator: " "))
        }
    }

    /// One target and what the runs made of it.
    public struct Verdict: Sendable {
        /// The target as docs/BENCHMARKS.md states it.
        public let target: String
        /// The measured figure (a share, a ratio, a rate or milliseconds); nil when a run it
        /// needs did not complete or did not measure it.
        public let value: Double?
        /// The bound the figure must reach (`atLeast`) or stay within.
        public let threshold: Double
        public let atLeast: Bool
        /// How `value` reads ("94.7 %", "2.13 ×").
        public let figure: String

        /// Whether the target was met; nil when it was not measured.
        public var met: Bool? {
            value.map { atLeast ? $0 >= threshold : $0 <= threshold }
        }
    }

    /// Every target's verdict from the runs' reports (a run missing or incomplete leaves its
    /// targets unmeasured).
    public static func verdicts(_ reports: [RunName: BenchmarkReport]) -> [Verdict] {
        func complete(_ name: RunName) -> BenchmarkReport? {
            reports[name].flatMap { $0.isComplete ? $0 : nil }
        }
        func rate(_ name: RunName) -> Double? {
            complete(name).map(\.peak.notificationsPerSecond)
        }
        func ratio(_ numerator: RunName, _ denominator: RunName) -> Double? {
            guard let top = rate(numerator), let bottom = rate(denominator), bottom > 0 else { return nil }
            return top / bottom
        }
        // Connections × streams / latency: 20,000 notifications/s when nothing else bounds the pipe.
        let slowAPNsCeiling = Double(slowAPNsConnections * slowAPNsStreams) * 1000 / Double(slowAPNsLatencyMilliseconds)
        return [
            share("single token ≥ 0.75 × h2load's rate", complete(.singleToken)?.peak.shareOfH2Load, 0.75),
            share("5-token fan-out ≥ 0.9 × h2load's rate", complete(.fanOut)?.peak.shareOfH2Load, 0.9),
            times("bridge CPU ≤ 1.5 × h2load's per request, single token", complete(.singleToken)?.peak.cpuRatioToH2Load),
            times("bridge CPU ≤ 1.5 × h2load's per request, fan-out", complete(.fanOut)?.peak.cpuRatioToH2Load),
            share("max_in_flight 5,000 ≥ 80 % of 100,000", ratio(.maxInFlight5000, .maxInFlight100000), 0.8),
            Verdict(target: "50 ms APNs latency, 2 × 500 streams ≥ 90 % of connections × streams / latency (18,000/s)",
                    value: rate(.slowAPNs), threshold: 0.9 * slowAPNsCeiling, atLeast: true,
                    figure: rate(.slowAPNs).map { "\(BenchmarkReport.format($0, 0))/s" } ?? "not measured"),
            milliseconds("p99 added latency ≤ 10 ms at half of the peak, single token", complete(.singleToken)),
            milliseconds("p99 added latency ≤ 10 ms at half of the peak, fan-out", complete(.fanOut)),
            share("exactly once ≥ 70 % of at least once", ratio(.exactlyOnce, .atLeastOnce), 0.7),
        ]
    }

    private static func share(_ target: String, _ value: Double?, _ threshold: Double) -> Verdict {
        Verdict(target: target, value: value, threshold: threshold, atLeast: true,
                figure: value.map { "\(BenchmarkReport.format($0 * 100, 1)) %" } ?? "not measured")
    }

    private static func times(_ target: String, _ value: Double?) -> Verdict {
        Verdict(target: target, value: value, threshold: 1.5, atLeast: false,
                figure: value.map { "\(BenchmarkReport.format($0, 2)) ×" } ?? "not measured")
    }

    private static func milliseconds(_ target: String, _ report: BenchmarkReport?) -> Verdict {
        let value = report?.addedLatencyP99
        let rate = report?.pacedRequestsPerSecond.map { " at \(BenchmarkReport.format($0, 0)) requests/s" } ?? ""
        return Verdict(target: target, value: value, threshold: 10, atLeast: false,
                       figure: value.map { "\(BenchmarkReport.format($0, 0)) ms\(rate)" } ?? "not measured")
    }

    /// One line per target (met, not met, or not measured, and the figure), then the count.
    public static func summary(_ verdicts: [Verdict]) -> [String] {
        var lines = verdicts.map { verdict in
            let mark = switch verdict.met {
            case true?: "met    "
            case false?: "NOT MET"
            case nil: "-      "
            }
            return "\(mark)  \(verdict.target): \(verdict.figure)"
        }
        let measured = verdicts.filter { $0.met != nil }
        lines.append("targets met: \(measured.filter { $0.met == true }.count) of \(verdicts.count)"
            + (measured.count < verdicts.count ? " (\(verdicts.count - measured.count) not measured: a run did not complete)" : ""))
        return lines
    }

    /// The verdicts and every run's report (its `BenchmarkReport.jsonLine`) as one line of JSON.
    public static func jsonLine(runs: [Run], reports: [RunName: BenchmarkReport], verdicts: [Verdict]) -> String {
        func quoted(_ text: String) -> String {
            var output = ""
            JSONText.appendQuoted(text, to: &output)
            return output
        }
        let targets = verdicts.map { verdict in
            "{\"target\":\(quoted(verdict.target)),\"value\":\(verdict.value.map { BenchmarkReport.format($0, 4) } ?? "null"),"
                + "\"threshold\":\(BenchmarkReport.format(verdict.threshold, 2)),\"at_least\":\(verdict.atLeast),"
                + "\"met\":\(verdict.met.map { "\($0)" } ?? "null"),\"figure\":\(quoted(verdict.figure))}"
        }
        let runEntries = runs.map { run in
            "{\"name\":\(quoted(run.name.rawValue)),\"options\":\(quoted(run.options)),\"report\":\(reports[run.name]?.jsonLine ?? "null")}"
        }
        let complete = runs.allSatisfy { reports[$0.name]?.isComplete == true }
        let met = verdicts.filter { $0.met == true }.count
        return "{\"complete\":\(complete),\"targets_met\":\(met),\"targets\":[\(targets.joined(separator: ","))],"
            + "\"runs\":[\(runEntries.joined(separator: ","))]}"
    }
}
