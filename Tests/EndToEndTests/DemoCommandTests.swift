import Foundation
import Testing

/// `apns-bridge demo` as a user runs it: on a pipe and on a terminal.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct DemoCommandTests {
    @Test func theDefaultDemoFinishesWithinThirtySecondsWithPlainLinesAndATable() throws {
        let demo = try CapturedProcess(BridgeBinary.url, ["demo"])
        let status = BridgeBinary.wait(demo.process, seconds: 30)
        #expect(status == 0, "\(demo.output)\(demo.errorOutput)")
        let output = demo.output
        #expect(!output.contains("\r") && !output.contains("\u{1b}"), "terminal control sequences on a pipe")
        let progressLines = output.split(separator: "\n").filter { $0.contains("s  results ") }
        #expect(!progressLines.isEmpty)
        #expect(progressLines.last?.contains("results 2500/2500 (100%)") == true)
        #expect(progressLines.allSatisfy { $0.contains("/s  in flight ") && $0.contains(" delivered ") && $0.contains(" invalid ") })
        #expect(output.contains("  outcome          tokens   share\n"))
        #expect(output.contains("  delivered          1900   76.0%\n"))
        #expect(output.contains("committed offsets: 2000 of 2000 requests; bridge exit code 0"))
        #expect(output.hasSuffix("every token got its expected result; every offset was committed\n"))
    }

    @Test func onATerminalTheProgressLineIsRedrawnInPlace() throws {
        // script(1) runs the demo on a pseudo-terminal and copies what it writes to its own output.
        let command = "\(BridgeBinary.url.path) demo --requests 300 --seconds 2"
        let demo = try CapturedProcess(URL(fileURLWithPath: "/usr/bin/script"), ["-qefc", command, "/dev/null"])
        let status = BridgeBinary.wait(demo.process, seconds: 30)
        #expect(status == 0, "\(demo.output)")
        let redraws = demo.output.components(separatedBy: "\r\u{1b}[2K")
        #expect(redraws.count > 3, "the line was not redrawn: \(demo.output)")
        #expect(redraws.last?.contains("results 375/375 (100%)") == true)
        #expect(demo.output.contains("committed offsets: 300 of 300 requests"))
    }
}
