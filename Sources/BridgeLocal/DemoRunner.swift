import Bridge
import JSON
import Foundation
import Kafka
import Observability

/// What a demo (or an end-to-end test) run saw.
public struct DemoReport: Sendable {
    /// Results by outcome.
    public var outcomes: [PushOutcome: Int] = [:]
    /// Records seen on each output topic.
    public var results = 0
    public var deadLetters = 0
    public var invalidTokens = 0
    /// Tokens whose result is missing, duplicated or has the wrong outcome.
    public var mismatches: [String] = []
    /// Sum over the request topic's partitions of the group's committed offsets.
    public var committedRecords: Int64 = 0
    /// Records produced to the request topic.
    public var producedRecords = 0
    /// The pipeline's exit code (0 after a clean stop).
    public var pipelineExitCode: Int32 = -1
    /// How often the bridge paused fetching for backpressure.
    public var fetchPauses = 0
    /// Of ``fetchPauses``, those counted before the first result was seen: exactly once, the
    /// hold until the producer's transactions are initialised counts as one when the group
    /// assigned partitions first.
    public var fetchPausesBeforeFirstResult = 0
    /// The most notifications and outputs the bridge held in flight at once.
    public var peakInFlight = 0
    /// Wall time from the first request to the last result, in seconds.
    public var seconds = 0.0

    /// Creates an empty report.
    public init() {}

    /// Whether every token got exactly its expected result and every offset was committed.
    public var isComplete: Bool {
        mismatches.isEmpty && committedRecords == Int64(producedRecords) && pipelineExitCode == 0
    }
}

/// A snapshot of a demo run in progress, for the live progress line.
public struct DemoProgress: Sendable, Equatable {
    /// Seconds since the run started.
    public var elapsedSeconds = 0.0
    /// Requests produced so far, of `totalRequests`.
    public var produced = 0
    public var totalRequests = 0
    /// Results seen so far, of `expectedResults`.
    public var results = 0
    public var expectedResults = 0
    /// Results by outcome so far.
    public var outcomes: [PushOutcome: Int] = [:]
    /// Dead letters and invalid-token records seen so far.
    public var deadLetters = 0
    public var invalidTokens = 0
    /// Notifications the bridge holds right now (sent or waiting to be sent).
    public var inFlight = 0
    /// Results per second over the last second.
    public var resultsPerSecond = 0.0

    /// Creates an empty snapshot.
    public init() {}

    /// Nothing has come out yet: the bridge and the observer are still joining their groups.
    public var isWaitingForGroups: Bool { results + deadLetters + invalidTokens == 0 }
}

/// Runs the bridge against a `LocalEnvironment` with a `DemoWorkload`, watches the output topics
/// until every result is in, stops the bridge and checks the committed offsets.
public enum DemoRunner {
    /// Runs `workload` end to end.
    /// - Parameters:
    ///   - produceOver: spread producing the requests over this long (zero: all before the bridge starts).
    ///   - progressInterval: how often `progress` receives a snapshot.
    public static func run(
        workload: DemoWorkload,
        environment: LocalEnvironment,
        configuration: BridgeConfiguration,
        timeoutSeconds: Double = 120,
        backpressureGrace: Duration = .seconds(1),
        produceOver: Duration = .zero,
        progressInterval: Duration = .seconds(1),
        progress: @escaping @Sendable (DemoProgress) -> Void = { _ in }
    ) throws -> DemoReport {
        var report = DemoReport()
        report.producedRecords = workload.records.count
        let started = Date()
        var schedule = ProductionSchedule(records: workload.records, over: produceOver)
        try environment.produceRequests(schedule.due(atSeconds: 0))
        let bridge = try BackgroundPipeline(configuration: configuration, backpressureGrace: backpressureGrace)

        let observer = try KafkaConsumer(
            bootstrapServers: environment.kafka.bootstrapServers,
            groupID: "demo-observer-\(UInt32.random(in: 0...UInt32.max))",
            topics: [environment.resultsTopic, environment.deadLetterTopic, environment.invalidTokensTopic],
            properties: ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500"],
            logger: Logger(label: "demo.observer")
        )
        defer { observer.close() }
        var seen: [String: PushOutcome] = [:]
        var snapshot = DemoProgress()
        snapshot.totalRequests = workload.records.count
        snapshot.expectedResults = workload.expectedResults
        var rate = RateWindow()
        var lastProgress = -Double.infinity
        var nextProduction = 0.0
        let interval = Double(progressInterval.components.seconds) + Double(progressInterval.components.attoseconds) / 1e18
        let deadline = started.addingTimeInterval(timeoutSeconds)
        while report.results < workload.expectedResults || report.deadLetters < workload.expectedDeadLetters
            || report.invalidTokens < workload.expectedInvalidTokens, Date() < deadline,
            bridge.exitCode == nil {
            let elapsed = Date().timeIntervalSince(started)
            if elapsed >= nextProduction {
                // In slices of a quarter second: each slice is one producer and one flush.
                nextProduction = elapsed + 0.25
                let due = schedule.due(atSeconds: elapsed)
                if !due.isEmpty { try environment.produceRequests(due) }
            }
            let resultsBefore = report.results
            // Read before the results that follow it: pauses counted later come after the first result.
            let pausesSoFar = bridge.pipeline.fetchPauseCount
            for message in try observer.poll(maxMessages: 1000, timeoutMilliseconds: 50) {
                record(message, environment: environment, report: &report, seen: &seen)
            }
            if resultsBefore == 0, report.results > 0 { report.fetchPausesBeforeFirstResult = pausesSoFar }
            let finished = report.results >= workload.expectedResults && report.deadLetters >= workload.expectedDeadLetters
                && report.invalidTokens >= workload.expectedInvalidTokens
            if elapsed - lastProgress >= interval || finished {
                lastProgress = elapsed
                snapshot.elapsedSeconds = elapsed
                snapshot.produced = schedule.producedCount
                snapshot.results = report.results
                snapshot.outcomes = report.outcomes
                snapshot.deadLetters = report.deadLetters
                snapshot.invalidTokens = report.invalidTokens
                snapshot.inFlight = bridge.pipeline.inFlightCount
                snapshot.resultsPerSecond = rate.add(seconds: elapsed, count: report.results)
                progress(snapshot)
            }
        }
        report.seconds = Date().timeIntervalSince(started)
        // Read on for half a second past the expected counts: a late duplicate then shows up in
        // the counts (and fails the checks) instead of going unseen.
        let settleDeadline = Date().addingTimeInterval(0.5)
        while Date() < settleDeadline {
            for message in try observer.poll(maxMessages: 1000, timeoutMilliseconds: 50) {
                record(message, environment: environment, report: &report, seen: &seen)
            }
        }

        report.pipelineExitCode = bridge.stop()
        report.fetchPauses = bridge.pipeline.fetchPauseCount
        report.peakInFlight = bridge.pipeline.peakInFlight
        report.committedRecords = try environment.committedRequestCount(groupID: configuration.kafka.groupID)
        for (key, outcome) in workload.expectedOutcomes where seen[key] != outcome {
            report.mismatches.append("\(key): expected \(outcome.rawValue), got \(seen[key]?.rawValue ?? "nothing")")
        }
        return report
    }

    private static func record(_ message: KafkaMessage, environment: LocalEnvironment, report: inout DemoReport,
                               seen: inout [String: PushOutcome]) {
        switch message.topic {
        case environment.deadLetterTopic:
            report.deadLetters += 1
        case environment.invalidTokensTopic:
            report.invalidTokens += 1
        default:
            report.results += 1
            guard let value = message.value, let document = try? JSONScanner.parse(value),
                  let requestID = document.root["request_id"]?.stringValue,
                  let token = document.root["token"]?.stringValue,
                  let outcome = document.root["outcome"]?.stringValue.flatMap(PushOutcome.init(rawValue:)) else {
                report.mismatches.append("unreadable result at offset \(message.offset)")
                return
            }
            report.outcomes[outcome, default: 0] += 1
            let key = DemoWorkload.outcomeKey(requestID: requestID, token: token)
            if seen.updateValue(outcome, forKey: key) != nil {
                report.mismatches.append("\(key): more than one result")
            }
        }
    }
}

/// Which records are due when, for producing a workload at an even pace.
struct ProductionSchedule {
    private let records: [DemoWorkload.Record]
    private let seconds: Double
    /// Records handed out so far.
    private(set) var producedCount = 0

    init(records: [DemoWorkload.Record], over duration: Duration) {
        self.records = records
        seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The records due by `elapsed` seconds that were not handed out yet.
    mutating func due(atSeconds elapsed: Double) -> ArraySlice<DemoWorkload.Record> {
        let target = seconds <= 0 ? records.count : min(records.count, Int(Double(records.count) * elapsed / seconds))
        guard target > producedCount else { return [] }
        defer { producedCount = target }
        return records[producedCount..<target]
    }
}

/// Results per second over the last second, from (time, running count) samples.
struct RateWindow {
    private var samples: [(seconds: Double, count: Int)] = []

    /// Adds a sample and returns the rate over the samples of the last second.
    mutating func add(seconds: Double, count: Int) -> Double {
        samples.append((seconds, count))
        while samples.count > 2, seconds - samples[1].seconds >= 1 { samples.removeFirst() }
        guard let first = samples.first, seconds > first.seconds else { return 0 }
        return Double(count - first.count) / (seconds - first.seconds)
    }
}
