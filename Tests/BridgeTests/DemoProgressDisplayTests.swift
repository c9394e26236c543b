import Bridge
import BridgeLocal
import Foundation
import Testing

@Suite struct DemoProgressDisplayTests {
    final class Output: @unchecked Sendable {
        var text = ""
    }

    static func snapshot(at seconds: Double, results: Int) -> DemoProgress {
        var progress = DemoProgress()
        progress.elapsedSeconds = seconds
        progress.produced = 100
        progress.totalRequests = 100
        progress.results = results
        progress.expectedResults = 120
        progress.outcomes = [.delivered: results - 2, .invalid: 2]
        progress.deadLetters = 5
        progress.inFlight = 17
        progress.resultsPerSecond = 432.4
        return progress
    }

    @Test func theLineShowsRateInFlightAndOutcomesSoFar() {
        let line = DemoProgressDisplay.line(Self.snapshot(at: 3.25, results: 60))
        #expect(line == "3.3s  results 60/120 (50%)  432/s  in flight 17  delivered 58 rejected 0 failed 0 expired 0 invalid 2  dead letters 5")
        var waiting = DemoProgress()
        waiting.produced = 10
        waiting.totalRequests = 100
        #expect(DemoProgressDisplay.line(waiting).contains("waiting for the bridge and the observer to join their consumer groups"))
    }

    @Test func onATerminalTheLineIsRedrawnInPlace() {
        let output = Output()
        var display = DemoProgressDisplay(isTerminal: true) { output.text += $0 }
        display.update(Self.snapshot(at: 0.2, results: 10))
        display.update(Self.snapshot(at: 0.4, results: 20))
        #expect(!output.text.contains("\n"))
        #expect(output.text.components(separatedBy: "\r\u{1b}[2K").count == 3)
        display.finish()
        #expect(output.text.hasSuffix("results 20/120 (16%)  432/s  in flight 17  delivered 18 rejected 0 failed 0 expired 0 invalid 2  dead letters 5\n"))
    }

    @Test func elsewherePlainLinesComeEveryIntervalAndTheLastStateAtTheEnd() {
        let output = Output()
        var display = DemoProgressDisplay(isTerminal: false, plainInterval: 2) { output.text += $0 }
        for step in 0...10 {
            display.update(Self.snapshot(at: Double(step) * 0.5, results: step * 10))
        }
        display.finish()
        let lines = output.text.split(separator: "\n")
        #expect(!output.text.contains("\r") && !output.text.contains("\u{1b}"))
        #expect(lines.map { $0.prefix(4) } == ["0.0s", "2.0s", "4.0s", "5.0s"])
        #expect(lines.last?.contains("results 100/120") == true)
    }

    @Test func theTableSumsUpOutcomesAndTopics() {
        var report = DemoReport()
        report.outcomes = [.delivered: 90, .rejected: 10]
        report.results = 100
        report.deadLetters = 3
        report.invalidTokens = 10
        report.seconds = 2
        report.committedRecords = 80
        report.producedRecords = 80
        report.pipelineExitCode = 0
        let table = DemoProgressDisplay.table(report)
        #expect(table.contains("  delivered            90   90.0%\n"))
        #expect(table.contains("  rejected             10   10.0%\n"))
        #expect(table.contains("  total               100\n"))
        #expect(table.contains("(50 results/s)"))
        #expect(table.contains("committed offsets: 80 of 80 requests"))
    }
}
