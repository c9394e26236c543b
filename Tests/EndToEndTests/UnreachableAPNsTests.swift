import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import TestSupport
import Testing

/// While no connection to APNs can be opened, fetching pauses: the backlog stays in Kafka, not
/// in the bridge's memory, and everything is delivered once APNs is back.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct UnreachableAPNsTests {
    @Test func whileAPNsIsUnreachableTheBacklogStaysInKafkaAndIsDeliveredWhenItReturns() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let address = environment.simulator.port
        let bridgeConfiguration = try environment.configuration(
            groupID: "e2e-unreachable", connections: 1, extra: "limits: {max_in_flight: 1000}")
        environment.simulator.close()  // APNs is unreachable from the start
        // Held until the new simulator takes it over: no other process's server may take the port.
        let reservation = try PortReservation(port: address)
        defer { reservation.release() }
        let count = 200
        let runner = try BackgroundPipeline(configuration: bridgeConfiguration)
        defer { runner.stop() }

        // Far below the in-flight limit, the failing connections alone pause both partitions.
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.pausedPartitionCount == 2 })
        #expect(runner.pipeline.fetchPauseCount >= 1)
        try environment.produceRequests(ShutdownTests.records(count))
        // Another reader fetches every request; the bridge, still paused, has taken none.
        let backlog = try KafkaTopicReader.readToEnd(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.requestTopic,
            timeoutMilliseconds: 30_000)
        #expect(backlog.count == count)
        #expect(runner.pipeline.pausedPartitionCount == 2)
        #expect(runner.pipeline.inFlightCount == 0, "the bridge took records while APNs was unreachable")

        // APNs returns at the same address: a connection opens, fetching resumes, all is delivered.
        var configuration = environment.credentials.simulatorConfiguration()
        configuration.port = address
        let simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        defer { simulator.close() }
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000)
        #expect(results.count == count)
        #expect(waitFor(timeout: .seconds(20)) {
            (try? environment.committedRequestCount(groupID: "e2e-unreachable")) == Int64(count)
        })
        #expect(runner.pipeline.pausedPartitionCount == 0)
        #expect(simulator.statistics.answersByStatus[200] == count)
    }

    /// A request's environment override leaves an idle pool behind; a reachable idle pool must
    /// not hide an outage of the endpoint every other request goes to.
    @Test func anIdlePoolOfAnOverrideDoesNotHideAnOutageOfTheConfiguredEndpoint() throws {
        let environment = try LocalEnvironment(partitions: 2)  // its simulator plays the sandbox
        defer { environment.close() }
        let production = try APNsSimulator(configuration: environment.credentials.simulatorConfiguration())
        try production.start()
        defer { production.close() }
        let yaml = environment.configurationYAML(groupID: "e2e-override", connections: 1)
            .replacingOccurrences(of: "production_url: https://127.0.0.1:\(environment.simulator.port)",
                                  with: "production_url: https://127.0.0.1:\(production.port)")
        #expect(yaml.contains("production_url: https://127.0.0.1:\(production.port)"))
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        defer { runner.stop() }
        let token = String(repeating: "4b", count: 32)
        try environment.produceRequests([
            DemoWorkload.Record(key: Array("p".utf8), value: Array(#"{"id":"p","token":"\#(token)","payload":{}}"#.utf8)),
            DemoWorkload.Record(key: Array("s".utf8),
                                value: Array(#"{"id":"s","token":"\#(token)","environment":"sandbox","payload":{}}"#.utf8)),
        ])
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: 2, timeoutMilliseconds: 30_000)
        #expect(results.count == 2)
        #expect(production.statistics.answersByStatus[200] == 1 && environment.simulator.statistics.answersByStatus[200] == 1)

        // Production goes away; the sandbox pool stays up, idle.
        production.close()
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.pausedPartitionCount == 2 },
                "fetching went on while every request's endpoint was unreachable")
    }
}
