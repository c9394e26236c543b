import APNs
import APNsSimulator
import Bridge
import Foundation
import Kafka
import Testing

/// Partitions that move while a member holds back fetching: a member that is paused must not
/// start fetching from partitions it gets (back) in a rebalance.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RebalanceWhilePausedTests {
    static func wait(seconds: Double, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() >= deadline { return false }
            usleep(20_000)
        }
        return true
    }

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
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
        environment.simulator.close()  // APNs unreachable: nothing in flight ever finishes

        // A takes the limit's worth of work and pauses everything it owns.
        let first = try BackgroundPipeline(configuration: configuration, backpressureGrace: .zero)
        defer { first.stop() }
        #expect(Self.wait(seconds: 30) { first.pipeline.fetchPauseCount > 0 })

        // B joins (A gives up some partitions), then leaves (A gets them back while paused).
        let second = try BackgroundPipeline(configuration: configuration, backpressureGrace: .zero)
        #expect(Self.wait(seconds: 30) { second.pipeline.inFlightCount > 0 })
        second.stop()
        sleep(4)  // the group hands B's partitions back to A

        let before = first.pipeline.inFlightCount
        sleep(2)
        let after = first.pipeline.inFlightCount
        #expect(after <= max(before, 1) + 1, "A kept fetching from returned partitions: \(before) → \(after)")
    }
}
