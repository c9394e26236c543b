#if canImport(Glibc)
import Glibc
#endif
import Observability
import Testing

@Suite struct LogLineFormatterTests {
    static let forgedRequestID = "r1\n2026-11-30T12:00:00.000Z ERROR [apns-bridge] forged\rline\u{1b}[2J\u{2028}x"

    @Test func textLinesEscapeControlCharactersSoInputCannotForgeALine() {
        let line = LogLineFormatter.format(
            format: .text, timeMilliseconds: 0, level: .info, label: "bridge", message: "got \(Self.forgedRequestID)",
            metadata: [("bridge.request_id", Self.forgedRequestID)]
        )
        #expect(line.filter { $0 == "\n" }.count == 1 && line.hasSuffix("\n"))
        #expect(!line.contains("\r") && !line.contains("\u{1b}") && !line.contains("\u{2028}"))
        #expect(line.contains(#"got r1\n2026-11-30T12:00:00.000Z ERROR [apns-bridge] forged\rline\u{1b}[2J\u{2028}x"#))
        #expect(line.contains(#"bridge.request_id="r1\n2026-11-30T12:00:00.000Z ERROR [apns-bridge] forged\rline"#))
    }

    @Test func textValuesWithSpacesOrEqualsAreQuotedSoInputCannotForgeAField() {
        let line = LogLineFormatter.format(
            format: .text, timeMilliseconds: 0, level: .warning, label: "x", message: "m",
            metadata: [("reason", #"ok level=error"#), ("plain", "abc"), ("empty", ""), ("quote", #"a"b"#), ("back", #"a\nb"#)]
        )
        #expect(line == #"1970-01-01T00:00:00.000Z WARNING [x] m reason="ok level=error" plain=abc empty="" quote="a\"b" back=a\\nb"# + "\n")
    }

    @Test func jsonLinesAreOneObjectPerLine() {
        let line = LogLineFormatter.format(
            format: .json, timeMilliseconds: 0, level: .error, label: "k", message: "m\n", metadata: [("id", Self.forgedRequestID)]
        )
        #expect(line.filter { $0 == "\n" }.count == 1 && line.hasSuffix("}\n"))
        #expect(line.hasPrefix(#"{"time":"1970-01-01T00:00:00.000Z","level":"error","logger":"k","message":"m\n","id":"r1\n2026"#))
    }
}

@Suite struct LogRepetitionFilterTests {
    let key = LogRepetitionFilter.Key(level: .error, label: "apns", message: "connection failed")

    // Free functions: #expect cannot take a mutating call directly.
    func admit(_ filter: inout LogRepetitionFilter, _ key: LogRepetitionFilter.Key, at now: ContinuousClock.Instant) -> Bool {
        filter.admit(key, at: now)
    }
    func due(_ filter: inout LogRepetitionFilter, at now: ContinuousClock.Instant) -> [LogRepetitionFilter.Summary] {
        filter.dueSummaries(at: now)
    }
    func drain(_ filter: inout LogRepetitionFilter) -> [LogRepetitionFilter.Summary] {
        filter.drainAll()
    }

    @Test func identicalEventsWithinTheIntervalAreCountedAndReportedOnce() {
        var filter = LogRepetitionFilter(interval: .seconds(10))
        let start = ContinuousClock.now
        #expect(admit(&filter, key, at: start))
        for step in 1...532 {
            let now = start + .milliseconds(step * 10)
            #expect(due(&filter, at: now).isEmpty)
            #expect(!admit(&filter, key, at: now))
        }
        #expect(due(&filter, at: start + .milliseconds(9_999)).isEmpty)
        #expect(due(&filter, at: start + .seconds(10)) == [.init(key: key, count: 532)])
        #expect(due(&filter, at: start + .seconds(11)).isEmpty)
        // After the interval the next one is written again and opens a new window.
        #expect(admit(&filter, key, at: start + .seconds(11)))
        #expect(!admit(&filter, key, at: start + .seconds(12)))
        #expect(drain(&filter) == [.init(key: key, count: 1)])
        #expect(drain(&filter).isEmpty)
    }

    @Test func differentMessagesAreIndependentAndAWindowWithoutRepeatsReportsNothing() {
        var filter = LogRepetitionFilter(interval: .seconds(1))
        let start = ContinuousClock.now
        let other = LogRepetitionFilter.Key(level: .error, label: "apns", message: "timeout")
        #expect(admit(&filter, key, at: start))
        #expect(admit(&filter, other, at: start))
        #expect(!admit(&filter, other, at: start + .milliseconds(500)))
        #expect(due(&filter, at: start + .seconds(2)) == [.init(key: other, count: 1)])
    }

    @Test func beyondItsCapacityNewKindsAreWrittenUnfiltered() {
        var filter = LogRepetitionFilter(interval: .seconds(10), capacity: 2)
        let now = ContinuousClock.now
        let keys = (0..<3).map { LogRepetitionFilter.Key(level: .warning, label: "l", message: "m\($0)") }
        #expect(admit(&filter, keys[0], at: now) && admit(&filter, keys[1], at: now))
        #expect(!admit(&filter, keys[1], at: now))
        #expect(admit(&filter, keys[2], at: now) && admit(&filter, keys[2], at: now))
    }
}

/// The logging system end to end: repeated errors are written once, then counted.
@Suite(.serialized) struct LoggingSystemRepetitionTests {
    @Test func aBurstOfIdenticalErrorsIsWrittenOnceAndReportedWithItsCount() throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        defer { close(descriptors[0]) }
        LoggingSystem.bootstrap(level: .info, format: .text, descriptor: descriptors[1], repetitionInterval: .seconds(60))
        let logger = Logger(label: "repetition-test")
        for index in 0..<533 {
            logger.error("cannot connect to broker", metadata: ["attempt": "\(index)"])
        }
        logger.warning("something else")
        LoggingSystem.flush()
        LoggingSystem.bootstrap(level: .info, format: .text)  // back to standard error
        close(descriptors[1])
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while case let count = read(descriptors[0], &buffer, buffer.count), count > 0 {
            bytes += buffer[0..<count]
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").filter { $0.contains("[repetition-test]") }
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first?.hasSuffix("ERROR [repetition-test] cannot connect to broker attempt=0") == true)
        #expect(lines.contains { $0.hasSuffix("WARNING [repetition-test] something else") })
        #expect(lines.last?.hasSuffix("ERROR [repetition-test] cannot connect to broker (repeated 532 times)") == true)
    }
}
