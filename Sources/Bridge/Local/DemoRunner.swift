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
    /// Wall time from the first request to the last result, in seconds.
    public var seconds = 0.0

    /// Whether every token got exactly its expected result and every offset was committed.
    public var isComplete: Bool {
        mismatches.isEmpty && committedRecords == Int64(producedRecords) && pipelineExitCode == 0
    }
}

/// Runs the bridge against a `LocalEnvironment` with a `DemoWorkload`, watches the output topics
/// until every result is in, stops the bridge and checks the committed offsets.
public enum DemoRunner {
    /// Runs `workload` end to end. `progress` receives a line about once a second.
    public static func run(
        workload: DemoWorkload,
        environment: LocalEnvironment,
        configuration: BridgeConfiguration,
        timeoutSeconds: Double = 120,
        backpressureGrace: Duration = .seconds(1),
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) throws -> DemoReport {
        var report = DemoReport()
        report.producedRecords = workload.records.count
        let started = Date()
        try environment.produceRequests(workload.records)
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
        var lastProgress = Date()
        let deadline = started.addingTimeInterval(timeoutSeconds)
        while report.results < workload.expectedResults || report.deadLetters < workload.expectedDeadLetters
            || report.invalidTokens < workload.expectedInvalidTokens, Date() < deadline,
            bridge.exitCode == nil {
            for message in try observer.poll(maxMessages: 1000, timeoutMilliseconds: 100) {
                record(message, environment: environment, report: &report, seen: &seen)
            }
            if Date().timeIntervalSince(lastProgress) >= 1 {
                lastProgress = Date()
                if report.results + report.deadLetters + report.invalidTokens == 0 {
                    progress("waiting for the bridge and the observer to join their consumer groups")
                } else {
                    progress("results \(report.results)/\(workload.expectedResults), dead letters \(report.deadLetters)/\(workload.expectedDeadLetters), invalid tokens \(report.invalidTokens)/\(workload.expectedInvalidTokens)")
                }
            }
        }
        report.seconds = Date().timeIntervalSince(started)

        report.pipelineExitCode = bridge.stop()
        report.fetchPauses = bridge.pipeline.fetchPauseCount
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
