import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import TestSupport
import Testing

/// Partitions that move while a member holds back fetching: a member that is paused must not
/// start fetching from partitions it gets (back) in a rebalance.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RebalanceWhilePausedTests {
    @Test func partitionsReturnedToAPausedMemberStayPaused() throws {
        let environment = try LocalEnvironment(partitions: 4)
        defer { environment.close() }
        try environment.produceRequests((0..<200).map { index in
            DemoWorkload.Record(
                key: Array("key-\(index)".utf8),
                value: Array(#"{"token":"\#(String(repeating: "5d", count: 32))","payload":{"aps":{}}}"#.utf8)
            )
        })
        let yaml = environment.configurationYAML(groupID: "e2e-moving", extra: "limits: {max_in_flight: 1}")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 1s")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
        #expect(yaml.contains("request_timeout: 60s"))
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
        // APNs takes every notification and never answers: nothing in flight ever finishes.
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))

        // A takes the limit's worth of work and pauses everything it owns.
        let first = try BackgroundPipeline(configuration: configuration, backpressureGrace: .zero)
        defer { first.stop() }
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.fetchPauseCount > 0 })
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.assignedPartitionCount == 4 })
        #expect(first.pipeline.pausedPartitionCount == 4)

        // B joins (A gives up some partitions), then leaves (A gets them back while paused).
        let second = try BackgroundPipeline(configuration: configuration, backpressureGrace: .zero)
        #expect(waitFor(timeout: .seconds(30)) { second.pipeline.inFlightCount > 0 })
        #expect(first.pipeline.assignedPartitionCount < 4)
        second.stop()
        // The group hands B's partitions back to A, which pauses them in the same callback.
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.assignedPartitionCount == 4 })
        #expect(first.pipeline.pausedPartitionCount == 4, "A fetches from partitions it got back while paused")
        #expect(first.pipeline.inFlightCount == 1)
    }
}
