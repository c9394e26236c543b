import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import Metrics
import Observability
import TestSupport
import Testing

/// Contract §6 through the whole pipeline: APNs's transient failures become retries, and the
/// results record the requests APNs saw.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct APNsRetryEndToEndTests {
    private static let retry = "retry: {max_attempts: 10, initial_backoff: 20ms, max_backoff: 300ms}"

    /// One single-token request per index, each to its own token.
    private func requests(_ count: Int) -> [DemoWorkload.Record] {
        (0..<count).map { index in
            DemoWorkload.Record(
                key: Array("r\(index)".utf8),
                value: Array(#"{"id":"r\#(index)","token":"\#(String(format: "%064lx", index + 1))","payload":{"aps":{}}}"#.utf8)
            )
        }
    }

    /// The results on the results topic, as JSON objects.
    private func readResults(_ environment: LocalEnvironment, count: Int) throws -> [[String: Any]] {
        let records = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000
        )
        return try records.map { record in
            try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
        }
    }

    /// `apns.ping_interval` and `apns.ping_timeout` from the configuration reach the pool: a
    /// connection that goes half-open (TCP up, nothing answered, PINGs included) is found by its
    /// PING and replaced, its streams retried as connection lost and delivered, before the
    /// 10 s `request_timeout` (which would retry them as timeouts) ends any of them. With the
    /// defaults (a PING after 60 s of silence) every retry would be a timeout.
    @Test func theConfiguredPingFindsAHalfOpenConnection() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.simulator.setFaults(APNsSimulatorFaults(halfOpenAfterStreams: 10))
        try environment.produceRequests(requests(30))

        let runner = try BackgroundPipeline(configuration: try environment.configuration(
            groupID: "e2e-ping", connections: 1, apns: "ping_interval: 1s\n  ping_timeout: 1s\n  " + Self.retry))
        defer { runner.stop() }
        let results = try readResults(environment, count: 30)
        let metrics = runner.pipeline.metrics.registry.render()
        #expect(runner.stop() == 0)

        try #require(results.count == 30)
        #expect(results.allSatisfy { $0["outcome"] as? String == "delivered" })
        let retries = { (cause: String) in
            metrics.split(separator: "\n").first { $0.hasPrefix("apns_bridge_retries_total{app=\"demo\",cause=\"\(cause)\"} ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        }
        #expect(retries("connection_lost") >= 1, "\(metrics)")
        #expect(retries("timeout") == 0)
        #expect(environment.simulator.statistics.connectionsAccepted >= 2)
    }

    @Test func fiveHundredThreesAreRetriedAndResultsCarryTheirAttempts() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        try environment.simulator.setFaults(APNsSimulatorFaults(failureRates: [503: 0.3]))
        try environment.produceRequests(requests(60))

        let runner = try BackgroundPipeline(
            configuration: try environment.configuration(groupID: "e2e-retry-503", apns: Self.retry))
        defer { runner.stop() }
        let results = try readResults(environment, count: 60)
        #expect(runner.stop() == 0)

        try #require(results.count == 60)
        #expect(results.allSatisfy { $0["outcome"] as? String == "delivered" && $0["status"] as? Int == 200 })
        let attempts = results.compactMap { $0["attempts"] as? Int }
        #expect(attempts.count == 60)
        #expect(attempts.contains { $0 > 1 })
        // Every request APNs saw is counted: one 200 per result plus every 503 it answered.
        let unavailable = environment.simulator.statistics.answersByStatus[503] ?? 0
        #expect(unavailable > 0)
        #expect(attempts.reduce(0, +) == 60 + unavailable)
    }

    /// A 500 whose body is a proxy's HTML page names no reason: the `failed` result still says
    /// its cause (contract §3), by Apple's name for the status.
    @Test func retriesRunOutOnAnswersWithoutAReasonAndTheResultStillSaysTheCause() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.simulator.setFaults(APNsSimulatorFaults(hostileAnswer: .nonJSONErrorBody))
        try environment.produceRequests(requests(3))

        let runner = try BackgroundPipeline(configuration: try environment.configuration(
            groupID: "e2e-no-reason", apns: "retry: {max_attempts: 2, initial_backoff: 20ms, max_backoff: 100ms}"))
        defer { runner.stop() }
        let results = try readResults(environment, count: 3)
        #expect(runner.stop() == 0)

        try #require(results.count == 3)
        for result in results {
            #expect(result["outcome"] as? String == "failed")
            #expect(result["status"] as? Int == 500)
            #expect(result["reason"] as? String == "InternalServerError", "\(result)")
            #expect(result["attempts"] as? Int == 2)
        }
        #expect(environment.simulator.statistics.answersByStatus[500] == 6)
    }

    @Test func aBrownoutDoesNotConsumeTheBacklogAsFailed() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        // APNs answers only 503 until it has answered 60 requests.
        try environment.simulator.setFaults(APNsSimulatorFaults(failureRates: [503: 1.0]))
        try environment.produceRequests(requests(30))

        let runner = try BackgroundPipeline(
            configuration: try environment.configuration(groupID: "e2e-brownout", apns: Self.retry))
        defer { runner.stop() }
        #expect(waitFor(timeout: .seconds(60)) { (environment.simulator.statistics.answersByStatus[503] ?? 0) >= 60 })
        try environment.simulator.setFaults(APNsSimulatorFaults())

        let results = try readResults(environment, count: 30)
        #expect(runner.stop() == 0)
        try #require(results.count == 30)
        let outcomes = Dictionary(grouping: results, by: { $0["outcome"] as? String ?? "?" }).mapValues(\.count)
        #expect(outcomes == ["delivered": 30], "\(outcomes)")
        // Every 503 of the brownout became a retry of a notification that was then delivered.
        let unavailable = environment.simulator.statistics.answersByStatus[503] ?? 0
        #expect(unavailable >= 60)
        #expect(results.reduce(0) { $0 + ($1["attempts"] as? Int ?? 0) } == 30 + unavailable)
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "e2e-brownout",
            topic: environment.requestTopic, partitions: 2
        )
        #expect(committed.values.reduce(0, +) == 30)
    }
}
