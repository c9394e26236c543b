import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import TestSupport
import Testing

/// Stopping while work is unfinished: nothing that APNs did not answer is reported or committed,
/// and the stop stays within `shutdown_timeout` even when Kafka is gone.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ShutdownTests {
    static func records(_ count: Int) -> [DemoWorkload.Record] {
        (0..<count).map { index in
            DemoWorkload.Record(
                key: Array("r\(index)".utf8),
                value: Array(#"{"id":"req-\#(index)","token":"\#(String(repeating: "7e", count: 32))","payload":{"aps":{}}}"#.utf8)
            )
        }
    }

    /// Starts a bridge whose APNs endpoint takes notifications and never answers them, and waits
    /// until it holds three. (An endpoint that refuses connections would pause fetching first.)
    static func startStuckBridge(_ environment: LocalEnvironment, groupID: String) throws -> BackgroundPipeline {
        try environment.produceRequests(records(3))
        let yaml = environment.configurationYAML(groupID: groupID)
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 2s")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.inFlightCount == 3 })
        return runner
    }

    @Test func unansweredNotificationsAreNeitherReportedNorCommitted() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let runner = try Self.startStuckBridge(environment, groupID: "stuck-apns")

        let started = Date()
        #expect(runner.stop() == 0)
        // The drain gives up a closing reserve early, so flushing and committing fit in the
        // 2 s shutdown_timeout too.
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds < 2, "stopping took \(seconds) s")

        // The bridge has stopped: the topic holds all it will ever hold.
        let results = try KafkaTopicReader.readToEnd(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            timeoutMilliseconds: 10_000)
        #expect(results.isEmpty, "a notification APNs never answered was reported")
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "stuck-apns",
            topic: environment.requestTopic, partitions: 1
        )
        #expect(committed[0] == nil)
    }

    /// Results APNs answered but Kafka never acknowledged are purged when the producer closes:
    /// abandoned like unanswered notifications (their offsets stay uncommitted), so the stop is
    /// still a clean one.
    @Test func resultsKafkaNeverAcknowledgedAreAbandonedAtTheStopNotAFailure() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.produceRequests(Self.records(3))
        var faults = environment.simulator.faults
        faults.latency = .milliseconds(1500)
        try environment.simulator.setFaults(faults)
        let yaml = environment.configurationYAML(groupID: "unacknowledged")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 2s")
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.inFlightCount == 3 })
        // The answers come while no broker takes the results.
        environment.kafka.setBrokerDown(1)
        #expect(waitFor(timeout: .seconds(20)) { environment.simulator.statistics.answersByStatus[200] == 3 })
        #expect(runner.pipeline.inFlightCount == 3)

        #expect(runner.stop() == 0)

        environment.kafka.setBrokerUp(1)
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "unacknowledged",
            topic: environment.requestTopic, partitions: 1
        )
        #expect(committed[0] == nil)
    }

    /// Offsets stored but not committed yet when Kafka goes away: the final commit cannot reach
    /// the coordinator, and the stop still fits `shutdown_timeout` (the offsets stay uncommitted:
    /// the next owner reads those records again).
    @Test func stoppingWithStoredOffsetsAndKafkaGoneStaysWithinTheShutdownTimeout() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.produceRequests(Self.records(3))
        let yaml = environment.configurationYAML(groupID: "stored-kafka-gone")
            .replacingOccurrences(of: "auto.commit.interval.ms: 200", with: "auto.commit.interval.ms: 600000")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 2s")
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        #expect(waitFor(timeout: .seconds(30)) {
            let results = try? KafkaTopicReader.readToEnd(
                bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
                timeoutMilliseconds: 2_000)
            return results?.count == 3 && runner.pipeline.inFlightCount == 0
        })
        environment.kafka.setBrokerDown(1)
        defer { environment.kafka.setBrokerUp(1) }

        let started = Date()
        let code = runner.stop()
        let seconds = Date().timeIntervalSince(started)
        #expect(code == 0)
        #expect(seconds < 3, "stopping took \(seconds) s")
    }

    /// The same through the binary and SIGTERM (contract §9: drains, commits and exits 0 within
    /// `shutdown_timeout`), the consumer's close left to go on as the process exits.
    @Test func theBinaryExitsZeroWithinTheShutdownTimeoutWithStoredOffsetsAndKafkaGone() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.produceRequests(Self.records(3))
        let yaml = environment.configurationYAML(groupID: "stored-kafka-gone-binary", extra: "log: {format: text}")
            .replacingOccurrences(of: "auto.commit.interval.ms: 200", with: "auto.commit.interval.ms: 600000")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 2s")
        let bridge = try BridgeRunProcess(yaml: yaml)
        #expect(waitFor(timeout: .seconds(30)) {
            let results = try? KafkaTopicReader.readToEnd(
                bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
                timeoutMilliseconds: 2_000)
            return results?.count == 3
        })
        environment.kafka.setBrokerDown(1)
        defer { environment.kafka.setBrokerUp(1) }

        let started = Date()
        kill(bridge.process.processIdentifier, SIGTERM)
        let status = BridgeBinary.wait(bridge.process, seconds: 30)
        let seconds = Date().timeIntervalSince(started)
        #expect(status == 0, "\(bridge.logTail)")
        // shutdown_timeout is 2 s (the watchdog would exit 1 at 7 s); the process's own exit, slower
        // under the sanitizers, gets a little slack on top.
        #expect(seconds < 3.5, "stopping took \(seconds) s \(bridge.logTail)")
    }

    @Test func stoppingWithKafkaGoneStaysWithinTheShutdownTimeout() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let runner = try Self.startStuckBridge(environment, groupID: "stuck-kafka")
        environment.kafka.setBrokerDown(1)
        defer { environment.kafka.setBrokerUp(1) }

        let started = Date()
        runner.stop()
        let seconds = Date().timeIntervalSince(started)

        // shutdown_timeout is 2 s; closing the Kafka clients gets a little slack on top.
        #expect(seconds < 5, "stopping took \(seconds) s")
    }
}
