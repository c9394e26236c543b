import Bridge
/// How `apns-bridge demo` shows a run: a live progress line and a final table.
///
/// On a terminal the line is redrawn in place (carriage return, erase line) a few times a
/// second; otherwise (a pipe, a CI log) a plain line is written every `plainInterval` seconds,
/// so logs stay readable. The text goes through `write`, so tests can read it.
public struct DemoProgressDisplay {
    /// Whether the output is a terminal.
    public let isTerminal: Bool
    /// Seconds between plain lines when not on a terminal.
    public let plainInterval: Double
    private let write: (String) -> Void
    private var lastPlainLine = -Double.infinity
    private var lineIsOpen = false
    private var unwritten: DemoProgress?

    /// Creates a display writing through `write`.
    public init(isTerminal: Bool, plainInterval: Double = 2, write: @escaping (String) -> Void) {
        self.isTerminal = isTerminal
        self.plainInterval = plainInterval
        self.write = write
    }

    /// Shows a snapshot.
    public mutating func update(_ progress: DemoProgress) {
        let line = Self.line(progress)
        if isTerminal {
            write("\r\u{1b}[2K" + line)
            lineIsOpen = true
        } else if progress.elapsedSeconds - lastPlainLine >= plainInterval {
            lastPlainLine = progress.elapsedSeconds
            write(line + "\n")
            unwritten = nil
        } else {
            unwritten = progress
        }
    }

    /// Ends the live line: on a terminal the last state stays on screen; otherwise the last
    /// snapshot is written if it was not.
    public mutating func finish() {
        if lineIsOpen { write("\n") }
        if let unwritten { write(Self.line(unwritten) + "\n") }
        lineIsOpen = false
        unwritten = nil
    }

    /// `  3.2s  results 1200/2500 (48%)  410/s  in flight 35  delivered 1100 rejected 40 …  dead letters 12`
    public static func line(_ progress: DemoProgress) -> String {
        let time = String(format1: progress.elapsedSeconds) + "s"
        guard !progress.isWaitingForGroups else {
            return "\(time)  produced \(progress.produced)/\(progress.totalRequests) requests; waiting for the bridge and the observer to join their consumer groups"
        }
        let percent = progress.expectedResults == 0 ? 100 : progress.results * 100 / progress.expectedResults
        var line = "\(time)  results \(progress.results)/\(progress.expectedResults) (\(percent)%)"
        line += "  \(Int(progress.resultsPerSecond.rounded()))/s  in flight \(progress.inFlight) "
        for outcome in PushOutcome.allCases {
            line += " \(outcome.rawValue) \(progress.outcomes[outcome, default: 0])"
        }
        line += "  dead letters \(progress.deadLetters)"
        return line
    }

    /// The final table: results by outcome with their share, the other topics, throughput and offsets.
    public static func table(_ report: DemoReport) -> String {
        let rows: [(String, Int)] = PushOutcome.allCases.map { ($0.rawValue, report.outcomes[$0, default: 0]) }
        let total = max(report.results, 1)
        var text = "  outcome          tokens   share\n"
        for (name, count) in rows {
            let share = String(format1: Double(count) * 100 / Double(total)) + "%"
            text += "  " + name.rightPadded(15) + count.description.leftPadded(8) + share.leftPadded(8) + "\n"
        }
        text += "  " + "total".rightPadded(15) + report.results.description.leftPadded(8) + "\n"
        text += "  " + "invalid-tokens".rightPadded(15) + report.invalidTokens.description.leftPadded(8) + "   records on apns.invalid-tokens\n"
        text += "  " + "dead letters".rightPadded(15) + report.deadLetters.description.leftPadded(8) + "   records on apns.dead-letters\n"
        let rate = report.seconds > 0 ? Double(report.results) / report.seconds : 0
        text += "  \(String(format1: report.seconds)) s from the first request to the last result (\(Int(rate.rounded())) results/s)\n"
        text += "  committed offsets: \(report.committedRecords) of \(report.producedRecords) requests; bridge exit code \(report.pipelineExitCode)\n"
        return text
    }
}

extension String {
    /// A number with one decimal, without Foundation.
    init(format1 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(abs(tenths % 10))"
    }

    /// Left-aligned in `width` characters (one space after it when it is longer).
    func rightPadded(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }

    /// Right-aligned in `width` characters.
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
