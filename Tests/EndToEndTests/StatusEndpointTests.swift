import APNs
import APNsSimulator
@testable import Bridge
import BridgeLocal
import Foundation
import HTTP2
import Kafka
import Observability
import Testing
import TestSupport

/// `/metrics`, `/healthz` and `/readyz` of a running bridge (mock cluster + simulator), checked
/// against the work it did and by Prometheus' own tools.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct StatusEndpointTests {
    /// A bridge on the environment with its status server, consuming on a thread of its own.
    final class RunningBridge {
        let pipeline: BridgePipeline
        let server: BridgeStatusServer
        private let finished = DispatchSemaphore(value: 0)

        /// - Parameter editYAML: changes the environment's configuration text before it is parsed.
        init(_ environment: LocalEnvironment, groupID: String, startConsuming: Bool = true,
             stallThreshold: Duration = .seconds(30), editYAML: (String) -> String = { $0 }) throws {
            // Statistics every 200 ms, so the lag series appears within the test.
            let yaml = editYAML(environment.configurationYAML(groupID: groupID))
                .replacingOccurrences(of: "    auto.commit.interval.ms: 200", with: "    auto.commit.interval.ms: 200\n    statistics.interval.ms: 200")
            pipeline = try BridgePipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
            server = try BridgeStatusServer(pipeline: pipeline, host: "127.0.0.1", port: 0, stallThreshold: stallThreshold)
            if startConsuming { start() }
        }

        func start() {
            let pipeline = self.pipeline, finished = self.finished
            Thread {
                _ = pipeline.run()
                finished.signal()
            }.start()
        }

        func get(_ path: String) -> HTTPTestClient.Response? {
            HTTPTestClient.get(port: server.port, path)
        }

        /// Sample values of `name` in the current `/metrics`, keyed by their label text.
        func samples(_ name: String) -> [String: Double] {
            guard let text = get("/metrics")?.body else { return [:] }
            var values: [String: Double] = [:]
            for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
                let parts = line.split(separator: " ")
                values[String(parts[0].dropFirst(name.count))] = Double(parts[1])
            }
            return values
        }

        func stop() {
            pipeline.requestStop()
            _ = finished.wait(timeout: .now() + 30)
            server.close()
        }
    }

    /// Bound before the pipeline exists (as `run` does), every endpoint says it is starting:
    /// alive (a liveness probe must not restart a process for starting), not ready, no metrics.
    @Test func beforeThePipelineIsAttachedEverythingAnswersStarting() throws {
        let server = try BridgeStatusServer(host: "127.0.0.1", port: 0)
        defer { server.close() }
        for (path, status) in [("/metrics", 503), ("/healthz", 200), ("/readyz", 503)] {
            let answer = HTTPTestClient.get(port: server.port, path)
            #expect(answer?.status == status, "\(path)")
            #expect(answer?.body == "starting\n", "\(path)")
        }
        #expect(throws: PipelineError.self) { try BridgeStatusServer(host: "127.0.0.1", port: server.port) }
    }

    @Test func readinessWaitsForTheGroupAndEndsWithTheStop() async throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let bridge = try RunningBridge(environment, groupID: "status-ready", startConsuming: false)

        let before = try #require(bridge.get("/readyz"))
        #expect(before.status == 503)
        #expect(before.body == "the consumer has not joined group status-ready yet\n")
        #expect(bridge.get("/healthz")?.status == 200)
        #expect(bridge.samples("apns_bridge_ready") == ["": 0])

        bridge.start()
        #expect(await eventually(timeout: .seconds(30)) { bridge.get("/readyz")?.status == 200 })
        #expect(bridge.get("/readyz")?.body == "ready\n")
        #expect(bridge.samples("apns_bridge_ready") == ["": 1])
        // Ready once the group answered; the partitions are counted a moment later, in the same callback.
        #expect(await eventually(timeout: .seconds(1)) { bridge.samples("apns_bridge_partitions_assigned") == ["": 2] })

        bridge.pipeline.requestStop()
        let stopping = bridge.get("/readyz")
        #expect(stopping?.status == 503)
        #expect(stopping?.body == "stopping\n")
        bridge.stop()
    }

    /// A consumer whose group went on without it (its session timed out while the brokers were
    /// unreachable: its partitions are lost) is not ready until the group assigns it again.
    @Test func readinessFollowsTheGroupMembershipLostAndBack() async throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let bridge = try RunningBridge(environment, groupID: "status-lost")
        defer { bridge.stop() }
        #expect(await eventually(timeout: .seconds(30)) { bridge.get("/readyz")?.status == 200 })

        environment.kafka.setBrokerDown(1)  // past session.timeout.ms (6 s): the partitions are lost
        #expect(await eventually(timeout: .seconds(40)) {
            bridge.get("/readyz")?.body == "the consumer lost its partitions in group status-lost and is rejoining\n"
        })
        #expect(bridge.get("/readyz")?.status == 503)
        #expect(bridge.get("/healthz")?.status == 200)

        environment.kafka.setBrokerUp(1)
        #expect(await eventually(timeout: .seconds(40)) { bridge.get("/readyz")?.status == 200 })
        #expect(await eventually(timeout: .seconds(1)) { bridge.samples("apns_bridge_partitions_assigned") == ["": 2] })
    }

    /// A loop stuck in a callback turns `/healthz` to 503 naming it; it recovers when the loop does.
    @Test func healthFailsWhileAnEventLoopIsStuck() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let bridge = try RunningBridge(environment, groupID: "status-health", stallThreshold: .seconds(2))
        defer { bridge.stop() }
        #expect(await eventually { bridge.get("/healthz")?.status == 200 })

        let release = DispatchSemaphore(value: 0)
        let stuck = try #require(bridge.pipeline.eventLoops.first)
        stuck.execute { release.wait() }  // deliberately blocks the loop
        let unhealthy = await eventually(timeout: .seconds(20)) { bridge.get("/healthz")?.status == 503 }
        #expect(unhealthy)
        let body = bridge.get("/healthz")?.body ?? ""
        release.signal()
        #expect(body.hasPrefix("event loop \(stuck.name) has not answered for"), "\(body)")
        #expect(await eventually(timeout: .seconds(20)) { bridge.get("/healthz")?.status == 200 })
    }

    /// `/readyz` answers in one line whatever its reason quotes (a client library's error text
    /// may hold line breaks): control characters are escaped, as in log lines.
    @Test func aReasonWithLineBreaksIsAnsweredInOneLine() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let bridge = try RunningBridge(environment, groupID: "status-one-line")
        defer { bridge.stop() }
        bridge.pipeline.fail("broker said:\nHTTP/1.1 200 OK\r\n\u{2028}ready")
        let answer = try #require(bridge.get("/readyz"))
        #expect(answer.status == 503)
        #expect(answer.body == "stopping after a fatal error: broker said:\\nHTTP/1.1 200 OK\\r\\n\\u{2028}ready\n", "\(answer.body)")
    }

    /// A consumer thread stuck inside `poll` (here in its statistics callback, as it would be
    /// in a log write to a full pipe) turns `/healthz` to 503 saying so; it recovers when the
    /// thread goes round again.
    @Test func healthFailsWhileTheConsumerLoopIsStuck() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let bridge = try RunningBridge(environment, groupID: "status-consumer", stallThreshold: .seconds(2))
        defer { bridge.stop() }
        #expect(await eventually { bridge.get("/healthz")?.status == 200 })

        let release = DispatchSemaphore(value: 0)
        let blocked = Locked(false)
        bridge.pipeline.consumer.statisticsHandler = { _ in
            // Deliberately blocks the consumer thread, the first time only.
            let first = blocked.withLock { wasBlocked in
                defer { wasBlocked = true }
                return !wasBlocked
            }
            if first { release.wait() }
        }
        let unhealthy = await eventually(timeout: .seconds(20)) { bridge.get("/healthz")?.status == 503 }
        #expect(unhealthy)
        let body = bridge.get("/healthz")?.body ?? ""
        release.signal()
        #expect(body.hasPrefix("the consumer loop has not polled for"), "\(body)")
        #expect(await eventually(timeout: .seconds(20)) { bridge.get("/healthz")?.status == 200 })
    }

    /// Every answer the simulator gave is counted once by status, every retry by cause, and every
    /// round trip lands in the duration histogram.
    @Test func apnsAnswersAndRetriesMatchWhatTheSimulatorSent() async throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        try environment.simulator.setFaults(APNsSimulatorFaults(failureRates: [503: 0.3, 429: 0.1]))
        let token = String(repeating: "4b", count: 32)
        try environment.produceRequests((0..<40).map { index in
            DemoWorkload.Record(key: Array("k\(index)".utf8),
                                value: Array(#"{"id":"r-\#(index)","token":"\#(token)","payload":{"aps":{}}}"#.utf8))
        })
        let bridge = try RunningBridge(environment, groupID: "status-retries")
        defer { bridge.stop() }
        #expect(await eventually(timeout: .seconds(60)) {
            bridge.samples("apns_bridge_notifications_total").values.reduce(0, +) == 40
        })

        let answers = environment.simulator.statistics.answersByStatus
        #expect(answers[503, default: 0] > 0, "no failure was injected: \(answers)")
        let responses = bridge.samples("apns_bridge_apns_responses_total")
        for (status, count) in answers {
            let counted = responses.filter { $0.key.contains("status=\"\(status)\"") }.values.reduce(0, +)
            #expect(counted == Double(count), "status \(status)")
        }
        #expect(responses["{app=\"demo\",status=\"503\",reason=\"ServiceUnavailable\"}"] == Double(answers[503, default: 0]))
        let notifications = bridge.samples("apns_bridge_notifications_total")
        #expect(notifications["{app=\"demo\",outcome=\"delivered\"}"] == Double(answers[200, default: 0]))
        // Each 429 or 503 answer is retried unless it was the notification's last attempt.
        let retries = bridge.samples("apns_bridge_retries_total")
        let failed = notifications["{app=\"demo\",outcome=\"failed\"}"] ?? 0
        let retried = (retries["{app=\"demo\",cause=\"status_5xx\"}"] ?? 0) + (retries["{app=\"demo\",cause=\"status_429\"}"] ?? 0)
        #expect(retried + failed == Double(answers[503, default: 0] + answers[429, default: 0]), "\(retries)")
        let durations = bridge.samples("apns_bridge_apns_request_duration_seconds_count")["{app=\"demo\"}"]
        #expect(durations == Double(answers.values.reduce(0, +)))
        #expect(bridge.samples("apns_bridge_connections")["{app=\"demo\",state=\"ready\"}"] == 2)
    }

    /// With APNs unreachable the bridge joins its group but stays not ready, saying why, and the
    /// connection gauge shows no ready connection.
    @Test func anAppWithoutAReadyConnectionKeepsTheBridgeNotReady() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let bridge = try RunningBridge(environment, groupID: "status-unready", startConsuming: false)
        defer { bridge.stop() }
        environment.simulator.close()  // APNs is unreachable from now on
        bridge.start()
        #expect(await eventually(timeout: .seconds(30)) { bridge.samples("apns_bridge_partitions_assigned") == ["": 1] })
        let answer = try #require(bridge.get("/readyz"))
        #expect(answer.status == 503)
        #expect(answer.body == "no APNs connection ready for app demo\n")
        let connections = bridge.samples("apns_bridge_connections")
        #expect(connections["{app=\"demo\",state=\"ready\"}"] == 0)
        #expect(connections.count == APNsConnectionStateName.allCases.count)
        #expect(bridge.get("/healthz")?.status == 200)
    }

    /// With two apps on two APNs endpoints, `/readyz` is 200 only while each has a ready
    /// connection: losing one app's endpoint turns it to 503 naming that app, and it comes back
    /// when the endpoint does.
    @Test func readinessNeedsEveryAppAndFollowsAnEndpointLostAndBack() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let reservation = try PortReservation()
        defer { reservation.release() }
        var configuration = environment.credentials.simulatorConfiguration(port: reservation.port)
        var second: APNsSimulator? = try APNsSimulator(configuration: configuration)
        try second?.start()
        defer { second?.close() }
        let bridge = try RunningBridge(environment, groupID: "status-two-apps") { yaml in
            let secondApp = """
                  - name: other
                    bundle_id: com.example.other
                    environment: sandbox
                    connections: 1
                    auth: {type: token, key_file: \(environment.credentials.authKeyFile), key_id: \(environment.credentials.keyID), team_id: \(environment.credentials.teamID)}
                http:
                """
            return yaml
                .replacingOccurrences(of: "sandbox_url: https://127.0.0.1:\(environment.simulator.port)",
                                      with: "sandbox_url: https://127.0.0.1:\(reservation.port)")
                .replacingOccurrences(of: "http:\n", with: secondApp + "\n")
        }
        defer { bridge.stop() }
        #expect(await eventually(timeout: .seconds(30)) { bridge.get("/readyz")?.status == 200 })
        #expect(bridge.samples("apns_bridge_connections")["{app=\"other\",state=\"ready\"}"] == 1)

        second?.close()
        second = nil
        #expect(await eventually(timeout: .seconds(30)) { bridge.get("/readyz")?.status == 503 })
        #expect(bridge.get("/readyz")?.body == "no APNs connection ready for app other\n")
        #expect(bridge.samples("apns_bridge_connections")["{app=\"demo\",state=\"ready\"}"] == 2)

        configuration.port = reservation.port
        second = try APNsSimulator(configuration: configuration)
        try second?.start()
        #expect(await eventually(timeout: .seconds(30)) { bridge.get("/readyz")?.status == 200 })
    }

    /// While APNs holds every answer back, the gauges show the waiting work: notifications in
    /// flight, and consumer lag for records consumed and not committed.
    @Test func theGaugesShowWorkWaitingForAPNs() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        try environment.simulator.setFaults(APNsSimulatorFaults(latency: .seconds(3)))
        let records = (0..<20).map { index in
            DemoWorkload.Record(
                key: Array("g\(index)".utf8),
                value: Array(#"{"id":"g\#(index)","token":"\#(String(format: "%064lx", index + 1))","payload":{"aps":{}}}"#.utf8))
        }
        try environment.produceRequests(records)
        let bridge = try RunningBridge(environment, groupID: "status-gauges")
        defer { bridge.stop() }
        #expect(await eventually(timeout: .seconds(30)) { bridge.samples("apns_bridge_in_flight") == ["": 20] })
        #expect(await eventually(timeout: .seconds(30)) {
            bridge.samples("apns_bridge_consumer_lag")["{topic=\"apns.requests\",partition=\"0\"}"] == 20
        })
        // Once APNs answers, both fall back to 0.
        #expect(await eventually(timeout: .seconds(30)) { bridge.samples("apns_bridge_in_flight") == ["": 0] })
        #expect(await eventually(timeout: .seconds(30)) {
            bridge.samples("apns_bridge_consumer_lag")["{topic=\"apns.requests\",partition=\"0\"}"] == 0
        })
    }

    /// librdkafka's statistics follow a partition's end through its fetches, which stop while
    /// the partition is paused: requests arriving while APNs is unreachable (fetching paused)
    /// still show in the lag gauge, from the paused partitions' latest offsets.
    @Test func theLagOfAPausedPartitionFollowsTheRecordsArrivingWhileItIsPaused() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let bridge = try Self.bridgeWithAPNsUnreachable(environment, groupID: "status-paused-lag")
        defer { bridge.stop() }
        #expect(await eventually(timeout: .seconds(30)) { bridge.pipeline.pausedPartitionCount == 1 })
        try environment.produceRequests(Self.requests("w", 0..<30))
        #expect(await eventually(timeout: .seconds(20)) {
            bridge.samples("apns_bridge_consumer_lag")["{topic=\"apns.requests\",partition=\"0\"}"] == 30
        })
        #expect(bridge.pipeline.pausedPartitionCount == 1)
        #expect(bridge.samples("apns_bridge_records_consumed_total").values.reduce(0, +) == 0)
    }

    /// librdkafka drops, unreported, a pause that reaches a partition after a newer operation on
    /// it. A partition the bridge holds paused that delivers records anyway is paused again, so
    /// the records arriving later stay in Kafka: here the test resumes the partition behind the
    /// bridge's back while APNs is unreachable.
    @Test func aHeldPartitionThatDeliversRecordsIsPausedAgain() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let bridge = try Self.bridgeWithAPNsUnreachable(environment, groupID: "status-paused-again")
        defer { bridge.stop() }
        #expect(await eventually(timeout: .seconds(30)) { bridge.pipeline.pausedPartitionCount == 1 })
        try bridge.pipeline.consumer.resume([KafkaTopicPartition(topic: environment.requestTopic, partition: 0)])
        func consumed() -> Double { bridge.samples("apns_bridge_records_consumed_total").values.reduce(0, +) }
        try environment.produceRequests(Self.requests("a", 0..<30))
        #expect(await eventually(timeout: .seconds(20)) { bridge.pipeline.repeatedPauseCount >= 1 })
        let consumedBeforeThePause = consumed()
        #expect(consumedBeforeThePause >= 1)

        try environment.produceRequests(Self.requests("b", 30..<60))
        #expect(await eventually(timeout: .seconds(20)) {
            bridge.samples("apns_bridge_consumer_lag")["{topic=\"apns.requests\",partition=\"0\"}"] == 60
        })
        #expect(consumed() == consumedBeforeThePause)
        #expect(bridge.pipeline.pausedPartitionCount == 1)
    }

    /// A bridge whose APNs endpoint refuses connections (fetching pauses as it starts).
    private static func bridgeWithAPNsUnreachable(_ environment: LocalEnvironment, groupID: String) throws -> RunningBridge {
        let port = environment.simulator.port
        return try RunningBridge(environment, groupID: groupID) { yaml in
            yaml.replacingOccurrences(of: "_url: https://127.0.0.1:\(port)", with: "_url: https://127.0.0.1:1")
        }
    }

    /// Single-token requests `<prefix><index>` for the indices of `range`.
    private static func requests(_ prefix: String, _ range: Range<Int>) -> [DemoWorkload.Record] {
        range.map { index in
            DemoWorkload.Record(
                key: Array("\(prefix)\(index)".utf8),
                value: Array(#"{"id":"\#(prefix)\#(index)","token":"\#(String(format: "%064lx", index + 1))","payload":{"aps":{}}}"#.utf8))
        }
    }

    @Test func countersFollowTheWorkAndPromtoolAcceptsTheOutput() async throws {
        let workload = DemoWorkload(count: 60, seed: 5)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        try environment.produceRequests(workload.records)
        let bridge = try RunningBridge(environment, groupID: "status-counters")
        defer { bridge.stop() }

        let expected = Dictionary(grouping: workload.expectedOutcomes.values, by: { $0 }).mapValues(\.count)
        // Counted per result, one after the other (an invalid token once its record is produced): waited for together.
        let finished = await eventually(timeout: .seconds(60)) {
            bridge.samples("apns_bridge_notifications_total").values.reduce(0, +) == Double(workload.expectedResults)
                && bridge.samples("apns_bridge_end_to_end_latency_seconds_count")["{app=\"demo\"}"] == Double(workload.expectedResults)
                && bridge.samples("apns_bridge_invalid_tokens_total").values.reduce(0, +) == Double(workload.expectedInvalidTokens)
        }
        #expect(finished)
        let notifications = bridge.samples("apns_bridge_notifications_total")
        for outcome in PushOutcome.allCases {
            #expect(notifications["{app=\"demo\",outcome=\"\(outcome.rawValue)\"}"] == Double(expected[outcome, default: 0]), "\(outcome)")
        }
        #expect(bridge.samples("apns_bridge_records_consumed_total") == ["{topic=\"apns.requests\"}": Double(workload.records.count)])
        #expect(bridge.samples("apns_bridge_dead_letters_total").values.reduce(0, +) == Double(workload.expectedDeadLetters))
        #expect(bridge.samples("apns_bridge_invalid_tokens_total").values.reduce(0, +) == Double(workload.expectedInvalidTokens))
        let latencyCount = bridge.samples("apns_bridge_end_to_end_latency_seconds_count")["{app=\"demo\"}"]
        #expect(latencyCount == Double(workload.expectedResults))
        #expect(await eventually(timeout: .seconds(30)) { bridge.samples("apns_bridge_in_flight") == ["": 0] })
        // Every assigned partition reports its lag, and with everything consumed it is 0.
        #expect(await eventually(timeout: .seconds(30)) {
            let lag = bridge.samples("apns_bridge_consumer_lag")
            return lag.count == Int(environment.partitions) && lag.values.allSatisfy { $0 == 0 }
        })
        #expect(try #require(bridge.samples("process_open_fds")[""]) > 10)
        #expect(try #require(bridge.samples("process_resident_memory_bytes")[""]) > 1_000_000)

        let response = try #require(bridge.get("/metrics"))
        #expect(response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
        let lint = try PrometheusTools.promtool(["check", "metrics"], input: response.body)
        #expect(lint.status == 0 && lint.output.isEmpty, "\(lint.output)")
        #expect(!response.body.contains(workload.unregisteredTokens.keys.first ?? "no token"))
    }

    /// A real Prometheus scrapes the bridge and sees its counters move (and loads the shipped
    /// alert rules without error).
    @Test func aRealPrometheusScrapesTheBridge() async throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let bridge = try RunningBridge(environment, groupID: "status-prometheus")
        defer { bridge.stop() }
        let prometheus = try PrometheusServer(scraping: "127.0.0.1:\(bridge.server.port)")
        defer { prometheus.stop() }

        #expect(await eventually(timeout: .seconds(60), every: .milliseconds(200)) {
            prometheus.query("up{job=\"apns-bridge\"}")?.first?.value == 1
        }, "Prometheus never scraped the bridge")
        #expect(await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
            prometheus.query("apns_bridge_ready")?.first?.value == 1
        })

        let token = String(repeating: "5a", count: 32)
        try environment.produceRequests((0..<20).map { index in
            DemoWorkload.Record(key: Array("k\(index)".utf8),
                                value: Array(#"{"id":"p-\#(index)","token":"\#(token)","payload":{"aps":{}}}"#.utf8))
        })
        let moved = await eventually(timeout: .seconds(60), every: .milliseconds(200)) {
            prometheus.query("sum(apns_bridge_notifications_total{outcome=\"delivered\"})")?.first?.value == 20
        }
        #expect(moved, "delivered never reached 20 in Prometheus")
        let consumed = prometheus.query("apns_bridge_records_consumed_total")
        #expect(consumed?.first?.value == 20)
        #expect(consumed?.first?.labels["topic"] == "apns.requests")
        #expect(prometheus.isRunning)
        // The shipped rules loaded and evaluate against real series.
        let rules = HTTPTestClient.get(port: prometheus.port, "/api/v1/rules")
        #expect(rules?.body.contains("\"name\":\"ApnsBridgeNotReady\"") == true)
        #expect(rules?.body.contains("\"health\":\"err\"") == false)
    }

    @Test func theBinaryServesTheStatusEndpointsOnHttpListen() async throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let port = try LoopbackPort.unused()
        let yaml = environment.configurationYAML(groupID: "status-binary")
            .replacingOccurrences(of: "listen: 127.0.0.1:0", with: "listen: 127.0.0.1:\(port)")
        let configFile = try TemporaryFile(contents: yaml)
        let process = try BridgeBinary.start(["run", "--config", configFile.path])
        defer { BridgeBinary.stop(process) }

        #expect(await eventually(timeout: .seconds(30)) { HTTPTestClient.get(port: port, "/readyz")?.status == 200 })
        #expect(HTTPTestClient.get(port: port, "/healthz")?.status == 200)
        let metrics = try #require(HTTPTestClient.get(port: port, "/metrics"))
        #expect(metrics.body.contains("# TYPE apns_bridge_notifications_total counter"))
        #expect(HTTPTestClient.get(port: port, "/nothing")?.status == 404)

        // A second bridge cannot take the same address: exit 2 naming the key.
        let second = try BridgeBinary.run(["run", "--config", configFile.path])
        #expect(second.status == 2)
        #expect(second.error.contains("http.listen"), "\(second.error)")

        kill(process.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(process, seconds: 30) == 0)
    }
}
