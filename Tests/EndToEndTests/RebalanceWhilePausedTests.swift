import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import TestSupport
import Testing

/// A member that holds back fetching: it must not start fetching from partitions it gets (back)
/// in a rebalance, and holding back must not make the group evict it.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RebalanceWhilePausedTests {
    @Test func partitionsReturnedToAPausedMemberStayPaused() throws {
        let environment = try LocalEnvironment(partitions: 4)
        defer { environment.close() }
        try Self.produceRequests(200, to: environment)
        let configuration = try Self.neverAnsweredConfiguration(environment, groupID: "e2e-moving")

        // A takes the limit's worth of work and pauses everything it owns.
        let first = try BackgroundPipeline(configuration: configuration, backpressureGrace: .zero)
        defer { first.stop() }
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.fetchPauseCount > 0 })
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.assignedPartitionCount == 4 })
        #expect(waitFor(timeout: .milliseconds(100)) { first.pipeline.pausedPartitionCount == 4 })

        // B joins (A gives up some partitions), then leaves (A gets them back while paused).
        let second = try BackgroundPipeline(configuration: configuration, backpressureGrace: .zero)
        #expect(waitFor(timeout: .seconds(60)) { second.pipeline.inFlightCount > 0 })
        #expect(first.pipeline.assignedPartitionCount < 4)
        second.stop()
        // The group hands B's partitions back to A, which pauses them in the same callback.
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.assignedPartitionCount == 4 })
        // (Counted assigned a moment before the callback pauses them: a moment, not a grace.)
        #expect(waitFor(timeout: .milliseconds(100)) { first.pipeline.pausedPartitionCount == 4 },
                "A fetches from partitions it got back while paused")
        #expect(first.pipeline.inFlightCount == 1)
    }

    /// A member that loses every partition it paused (the group took them away) and gets them
    /// back while the reason to hold back remains pauses them as they come back, not one
    /// backpressure grace later.
    @Test func partitionsLostByAPausedMemberComeBackPaused() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        try Self.produceRequests(50, to: environment)
        let runner = try BackgroundPipeline(
            configuration: try Self.neverAnsweredConfiguration(environment, groupID: "e2e-lost-paused"),
            backpressureGrace: .seconds(3))
        defer { runner.stop() }
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.pausedPartitionCount == 2 })

        // The next heartbeat is answered UNKNOWN_MEMBER_ID: the member loses its partitions and joins again.
        let heartbeat: Int16 = 12
        environment.kafka.pushBrokerRequestErrors(broker: 1, apiKey: heartbeat, errors: [25])  // UNKNOWN_MEMBER_ID
        #expect(waitFor(timeout: .seconds(10)) { environment.kafka.pendingRequestErrors(broker: 1, apiKey: heartbeat) == 0 })
        // From then on, partitions assigned are paused: at most a moment between the two counts.
        // (The group takes them back once the old membership's session has timed out.)
        // (The response to the heartbeat may still be on its way: the partitions count as back
        // only once they were seen gone.)
        var longestUnpaused = 0
        var unpaused = 0
        var lost = false
        var backSince: ContinuousClock.Instant?
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, backSince.map({ ContinuousClock.now - $0 < .seconds(1) }) ?? true {
            let assigned = runner.pipeline.assignedPartitionCount
            unpaused = assigned > runner.pipeline.pausedPartitionCount ? unpaused + 1 : 0
            longestUnpaused = max(longestUnpaused, unpaused)
            if assigned == 0 { lost = true }
            if lost, assigned == 2, backSince == nil { backSince = ContinuousClock.now }
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(lost, "the member never lost its partitions")
        #expect(longestUnpaused < 10, "assigned partitions fetched unpaused for about \(longestUnpaused * 10) ms")
        #expect(runner.pipeline.assignedPartitionCount == 2)
        #expect(runner.pipeline.pausedPartitionCount == 2)
        #expect(runner.pipeline.inFlightCount == 1)
    }

    /// Held back for 2.5 times the consumer's `max.poll.interval.ms` (APNs never answers its one
    /// notification in flight, `max_in_flight` 1, fetching paused), the `apns-bridge run`
    /// process keeps polling: the group never evicts it, it keeps its partitions, and once APNs
    /// answers again every record completes and is committed.
    @Test func aMemberHeldBackPastItsPollIntervalKeepsItsPartitions() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let count = 20
        try Self.produceRequests(count, to: environment)
        // Short, so the hold is short: librdkafka wants the poll interval at least the session timeout.
        let pollInterval = 3000
        let yaml = environment.configurationYAML(
            groupID: "e2e-poll-interval", extra: "limits: {max_in_flight: 1}",
            consumer: ["max.poll.interval.ms": "\(pollInterval)"]
        ).replacingOccurrences(of: "session.timeout.ms: 6000", with: "session.timeout.ms: \(pollInterval)")
        #expect(yaml.contains("session.timeout.ms: \(pollInterval)"))
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        let bridge = try BridgeProcess(executable: BridgeBinary.url.path, yaml: yaml, instanceID: "held")

        #expect(waitFor(timeout: .seconds(30)) {
            (bridge.metric("apns_bridge_fetch_pauses_total") ?? 0) >= 1 && bridge.metric("apns_bridge_partitions_assigned") == 2
        }, "\(bridge.logTail)")
        let evicted = waitFor(timeout: .milliseconds(Int64(pollInterval) * 5 / 2), every: .milliseconds(50)) {
            let log = bridge.log
            return log.contains("maximum poll interval") || log.contains("partitions revoked")
                || bridge.metric("apns_bridge_partitions_assigned").map { $0 != 2 } ?? false
        }
        #expect(!evicted, "\(bridge.logTail)")
        #expect(bridge.metric("apns_bridge_in_flight") == 1)
        #expect(environment.simulator.statistics.streamsStalled == 1)

        // APNs answers again: the stalled notification is sent again after its request timeout.
        try environment.simulator.setFaults(APNsSimulatorFaults())
        #expect(waitFor(timeout: .seconds(30)) {
            (try? environment.committedRequestCount(groupID: "e2e-poll-interval")) == Int64(count)
        }, "\(bridge.logTail)")
        #expect(bridge.metric("apns_bridge_notifications_total") == Double(count))
        #expect(!bridge.log.contains("partitions revoked"))
        #expect(bridge.stop(timeoutSeconds: 30).status == 0)
    }

    /// `count` single-token requests on the request topic.
    static func produceRequests(_ count: Int, to environment: LocalEnvironment) throws {
        try environment.produceRequests((0..<count).map { index in
            DemoWorkload.Record(
                key: Array("key-\(index)".utf8),
                value: Array(#"{"token":"\#(String(repeating: "5d", count: 32))","payload":{"aps":{}}}"#.utf8)
            )
        })
    }

    /// A configuration with `max_in_flight` 1 for a simulator made to take every notification
    /// and never answer: the one in flight never finishes (nor times out), so fetching is held back.
    static func neverAnsweredConfiguration(_ environment: LocalEnvironment, groupID: String) throws -> BridgeConfiguration {
        let yaml = environment.configurationYAML(groupID: groupID, extra: "limits: {max_in_flight: 1}")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 1s")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
        #expect(yaml.contains("request_timeout: 60s"))
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        return try BridgeConfiguration.parse(yaml: yaml, environment: [:])
    }
}
