import Bridge
import Observability

/// The performance targets of docs/BENCHMARKS.md as one measurement: the seven bench runs
/// `apns-bridge bench --targets` makes one after the other, and each target's verdict from
/// their reports.
public enum BenchmarkTargets {
    /// One of the seven runs.
    public enum RunName: String, CaseIterable, Sendable {
        /// The runs of the rate, CPU and p99 targets, each with h2load's reference and a paced run.
        case singleToken = "single token", fanOut = "5-token fan-out"
        /// The two runs whose rates the backpressure target compares.
        case maxInFlight5000 = "max_in_flight 5000", maxInFlight100000 = "max_in_flight 100000"
        /// The run against a simulator that answers 50 ms late.
        case slowAPNs = "50 ms APNs latency"
        /// The two runs whose rates the exactly-once target compares.
        case atLeastOnce = "at least once", exactlyOnce = "exactly once"
    }

    /// A run: its name, its settings, and the `apns-bridge bench` options that make the same run.
    public struct Run: Sendable {
        /// Which of the seven it is.
        public let name: RunName
        /// What `BenchmarkRunner.run` is given.
        public let settings: BenchmarkSettings
        /// The options of `apns-bridge bench` that make the same run on their own (empty: the
        /// defaults).
        public let options: String

        /// The whole command: `apns-bridge bench` and `options`.
        public var command: String {
            options.isEmpty ? "apns-bridge bench" : "apns-bridge bench \(options)"
        }
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
            var shared = settings.rounds == defaults.rounds ? [] : ["--rounds", "\(settings.rounds)"]
            if !settings.wrapper.isEmpty { shared += ["--wrapper", "'\(settings.wrapper.joined(separator: " "))'"] }
            if settings.bridgeLogLevel != defaults.bridgeLogLevel { shared += ["--log-level", settings.bridgeLogLevel] }
            return Run(name: name, settings: settings, options: (requests + options + shared).joined(separator: " "))
        }
    }

    /// One target and what the runs made of it.
    public struct Verdict: Sendable {
        /// The target as docs/BENCHMARKS.md states it.
        public let target: String
        /// The measured figure (a share, a ratio, a rate or milliseconds); nil when it was not
        /// measured.
        public let value: Double?
        /// The bound the figure must reach (`atLeast`) or stay within.
        public let threshold: Double
        /// Whether the figure must be at least `threshold` (rates and shares) rather than at most
        /// (CPU and latency).
        public let atLeast: Bool
        /// How `value` reads ("94.7 %", "2.13 ×"), rounded away from the target so that a figure
        /// that reads as the threshold met it; why there is no figure otherwise.
        public let figure: String

        /// Whether the target was met; nil when it was not measured.
        public var met: Bool? {
            value.map { atLeast ? $0 >= threshold : $0 <= threshold }
        }
    }

    /// A figure, or why there is none.
    enum Measurement {
        case value(Double)
        case missing(String)
    }

    /// Every target's verdict from the runs' reports: nine, since the CPU and p99 targets are
    /// judged for single tokens and for fan-out. A run missing (it could not start) or
    /// incomplete measures nothing, neither its own targets nor a ratio it is part of.
    public static func verdicts(_ reports: [RunName: BenchmarkReport]) -> [Verdict] {
        func complete(_ name: RunName) -> BenchmarkReport? {
            reports[name].flatMap { $0.isComplete ? $0 : nil }
        }
        func measured(_ name: RunName, missing: String, _ figure: (BenchmarkReport) -> Double?) -> Measurement {
            guard let report = complete(name) else { return .missing("the \(name.rawValue) run did not complete") }
            return figure(report).map(Measurement.value) ?? .missing(missing)
        }
        func ratio(_ numerator: RunName, _ denominator: RunName) -> Measurement {
            guard let top = complete(numerator)?.peak.notificationsPerSecond,
                  let bottom = complete(denominator)?.peak.notificationsPerSecond, bottom > 0 else {
                return .missing("the \(numerator.rawValue) or the \(denominator.rawValue) run did not complete")
            }
            return .value(top / bottom)
        }
        let noH2Load = "no h2load reference in the run"
        let noPacedResults = "no paced results in the run"
        // Connections × streams / latency: what the pipe carries when APNs alone bounds it.
        let ceiling = slowAPNsConnections * slowAPNsStreams * 1000 / slowAPNsLatencyMilliseconds
        return [
            Verdict(share: "single token ≥ 0.75 × h2load's rate", 0.75,
                    measured(.singleToken, missing: noH2Load) { $0.peak.shareOfH2Load }),
            Verdict(share: "5-token fan-out ≥ 0.9 × h2load's rate", 0.9,
                    measured(.fanOut, missing: noH2Load) { $0.peak.shareOfH2Load }),
            Verdict(times: "bridge CPU ≤ 1.5 × h2load's per request, single token", 1.5,
                    measured(.singleToken, missing: noH2Load) { $0.peak.cpuRatioToH2Load }),
            Verdict(times: "bridge CPU ≤ 1.5 × h2load's per request, fan-out", 1.5,
                    measured(.fanOut, missing: noH2Load) { $0.peak.cpuRatioToH2Load }),
            Verdict(share: "max_in_flight 5,000 ≥ 80 % of 100,000", 0.8, ratio(.maxInFlight5000, .maxInFlight100000)),
            Verdict(target: "\(slowAPNsLatencyMilliseconds) ms APNs latency, \(slowAPNsConnections) × \(slowAPNsStreams) streams "
                        + "≥ 90 % of connections × streams / latency (\(grouped(ceiling * 9 / 10))/s)",
                    threshold: Double(ceiling) * 0.9, atLeast: true, decimals: 0, unit: "/s",
                    measured(.slowAPNs, missing: "no results") { $0.peak.notificationsPerSecond }),
            Verdict(latency: "p99 added latency ≤ 10 ms at half of the peak, single token", complete(.singleToken),
                    measured(.singleToken, missing: noPacedResults) { $0.addedLatencyP99 }),
            Verdict(latency: "p99 added latency ≤ 10 ms at half of the peak, fan-out", complete(.fanOut),
                    measured(.fanOut, missing: noPacedResults) { $0.addedLatencyP99 }),
            Verdict(share: "exactly once ≥ 70 % of at least once", 0.7, ratio(.exactlyOnce, .atLeastOnce)),
        ]
    }

    /// `value` with `decimals` decimals, rounded down (`down`) or up.
    static func rounded(_ value: Double, decimals: Int, down: Bool) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = value * scale
        return BenchmarkReport.format((down ? scaled.rounded(.down) : scaled.rounded(.up)) / scale, decimals)
    }

    /// `value` (not negative) with a comma between each group of three digits (`18,000`).
    static func grouped(_ value: Int) -> String {
        var digits = String(value)
        var index = digits.endIndex
        while digits.distance(from: digits.startIndex, to: index) > 3 {
            index = digits.index(index, offsetBy: -3)
            digits.insert(",", at: index)
        }
        return digits
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
            + (measured.count < verdicts.count ? " (\(verdicts.count - measured.count) not measured)" : ""))
        return lines
    }

    /// The verdicts and every run's report (its `BenchmarkReport.jsonLine`) as one line of JSON.
    public static func jsonLine(runs: [Run], reports: [RunName: BenchmarkReport], verdicts: [Verdict]) -> String {
        func quoted(_ text: String) -> String {
            var output = ""
            JSONText.appendQuoted(text, to: &output)
            return output
        }
        // Numbers as Swift writes a Double, which reads back exactly: a share of 0.74996 must not
        // read as 0.75 next to `"met":false`.
        func number(_ value: Double?) -> String {
            value.flatMap { $0.isFinite ? "\($0)" : nil } ?? "null"
        }
        let targets = verdicts.map { verdict in
            "{\"target\":\(quoted(verdict.target)),\"value\":\(number(verdict.value)),"
                + "\"threshold\":\(number(verdict.threshold)),\"at_least\":\(verdict.atLeast),"
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

extension BenchmarkTargets.Verdict {
    /// A verdict on `measurement` against `threshold`: its figure `scale` times the value with
    /// `decimals` decimals, rounded away from the target, then `unit` and `suffix`.
    init(target: String, threshold: Double, atLeast: Bool, decimals: Int, scale: Double = 1, unit: String,
         suffix: String = "", _ measurement: BenchmarkTargets.Measurement) {
        self.target = target
        self.threshold = threshold
        self.atLeast = atLeast
        switch measurement {
        case .value(let value):
            self.value = value
            figure = BenchmarkTargets.rounded(value * scale, decimals: decimals, down: atLeast) + unit + suffix
        case .missing(let reason):
            value = nil
            figure = "not measured (\(reason))"
        }
    }

    /// A share, or a ratio of two rates, that must reach `threshold`; shown in percent.
    init(share target: String, _ threshold: Double, _ measurement: BenchmarkTargets.Measurement) {
        self.init(target: target, threshold: threshold, atLeast: true, decimals: 1, scale: 100, unit: " %", measurement)
    }

    /// A CPU ratio that must stay within `threshold`.
    init(times target: String, _ threshold: Double, _ measurement: BenchmarkTargets.Measurement) {
        self.init(target: target, threshold: threshold, atLeast: false, decimals: 2, unit: " ×", measurement)
    }

    /// A p99 that must stay within 10 ms, shown with the paced rate of `report`.
    init(latency target: String, _ report: BenchmarkReport?, _ measurement: BenchmarkTargets.Measurement) {
        let rate = report?.pacedRequestsPerSecond.map { " at \(BenchmarkReport.format($0, 0)) requests/s" } ?? ""
        self.init(target: target, threshold: 10, atLeast: false, decimals: 0, unit: " ms", suffix: rate, measurement)
    }
}
