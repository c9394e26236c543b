import APNs
import APNsSimulator
@testable import Bridge
import BridgeLocal
import Foundation
import Kafka
import Observability
import TestSupport
import Testing

/// Contract §6 proved, not assumed: restarts, a refused output, rebalances with work in flight,
/// the in-flight bound and a drain on SIGTERM, each checked on what reaches Kafka (exact counts,
/// read past the expected number so late duplicates show) and on the committed offsets.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct DeliveryGuaranteeTests {
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    /// `count` single-token requests `g<index>`.
    static func requests(_ count: Int, first: Int = 0) -> [DemoWorkload.Record] {
        (first..<(first + count)).map { index in
            DemoWorkload.Record(
                key: Array("g\(index)".utf8),
                value: Array(#"{"id":"g\#(index)","token":"\#(token(index))","payload":{"aps":{}}}"#.utf8))
        }
    }

    static func requestIDs(_ messages: [KafkaMessage]) -> [String] {
        messages.compactMap { $0.key.map { String(decoding: $0, as: UTF8.self) } }
    }

    @Test func aRestartDeliversTheRequestsTheStoppedBridgeLeftUnanswered() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let count = 12
        try environment.produceRequests(Self.requests(count))
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))  // APNs takes the requests, never answers
        let yaml = environment.configurationYAML(groupID: "e2e-restart", extra: "log: {level: debug, format: text}")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 3s")
        let configFile = try TemporaryFile(contents: yaml)
        let log = try ScratchDirectory()
        defer { log.remove() }

        let first = try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("first.log"))
        defer { BridgeBinary.stop(first) }
        #expect(waitFor(timeout: .seconds(30)) { BridgeBinary.count("request admitted", in: log.file("first.log")) == count })
        #expect(waitFor(timeout: .seconds(10)) { environment.simulator.statistics.requestsReceived >= count })
        kill(first.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(first, seconds: 30) == 0, "\(BridgeBinary.tail(of: log.file("first.log")))")
        #expect(try environment.committedRequestCount(groupID: "e2e-restart") == 0)
        // The first bridge has stopped: the topic holds all it will ever hold from it.
        let nothing = try KafkaTopicReader.readToEnd(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            timeoutMilliseconds: 10_000)
        #expect(nothing.isEmpty, "a notification APNs never answered was reported")

        try environment.simulator.setFaults(APNsSimulatorFaults())
        let second = try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("second.log"))
        defer { BridgeBinary.stop(second) }
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000, settleMilliseconds: 1_000)
        #expect(results.count == count)
        #expect(Set(Self.requestIDs(results)) == Set((0..<count).map { "g\($0)" }))
        #expect(waitFor(timeout: .seconds(20)) {
            (try? environment.committedRequestCount(groupID: "e2e-restart")) == Int64(count)
        })
        kill(second.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(second, seconds: 30) == 0, "\(BridgeBinary.tail(of: log.file("second.log")))")
    }

    @Test func aRefusedOutputStopsTheCommitBeforeItsRecordWhileLaterOutputsAreAccepted() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        // Records 0, 1, 3 and 4 carry malformed tokens: their results are published at once,
        // without APNs. Record 2 goes to APNs, which holds it until the later records' outputs
        // are acknowledged; then Kafka refuses every record as too large (a permanent error), and
        // APNs answers record 2's next attempt: its result is refused.
        let records = (0..<5).map { index in
            let token = index == 2 ? Self.token(2) : "not-a-token-\(index)"
            return DemoWorkload.Record(
                key: Array("p\(index)".utf8), value: Array(#"{"id":"p\#(index)","token":"\#(token)","payload":{"aps":{}}}"#.utf8))
        }
        try environment.produceRequests(records)
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        // Record 2's attempts time out after 2 s and are retried within a fifth of a second,
        // far more times than the stall can last.
        let yaml = environment.configurationYAML(groupID: "e2e-refused-one",
                                                 apns: "retry: {max_attempts: 100, initial_backoff: 10ms, max_backoff: 200ms}")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 2s")
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))

        let later = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic, expectedCount: 4,
            timeoutMilliseconds: 20_000, settleMilliseconds: 0)
        #expect(Set(Self.requestIDs(later)) == ["p0", "p1", "p3", "p4"])
        let invalidTokens = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.invalidTokensTopic, expectedCount: 4,
            timeoutMilliseconds: 20_000, settleMilliseconds: 0)
        #expect(invalidTokens.count == 4)
        // Every output of records 3 and 4 acknowledged, record 2 still with APNs.
        #expect(waitFor(timeout: .seconds(10)) {
            runner.pipeline.outputsAwaitingKafka == 0 && runner.pipeline.notificationsAwaitingAPNs == 1
        })
        environment.kafka.pushRequestErrors(
            apiKey: MockKafkaCluster.APIKey.produce, errors: Array(repeating: 10, count: 200))  // MESSAGE_TOO_LARGE
        try environment.simulator.setFaults(APNsSimulatorFaults())

        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.fatalErrorDescription != nil })
        #expect(runner.pipeline.fatalErrorDescription?.contains("MSG_SIZE_TOO_LARGE") == true, "\(String(describing: runner.pipeline.fatalErrorDescription))")
        #expect(runner.stop() == 1)

        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic, expectedCount: 4,
            timeoutMilliseconds: 20_000, settleMilliseconds: 500)
        #expect(Set(Self.requestIDs(results)) == ["p0", "p1", "p3", "p4"])
        #expect(results.count == 4)
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "e2e-refused-one",
            topic: environment.requestTopic, partitions: 1)
        #expect(committed[0] == 2, "the commit must stop right before the record whose output was refused")
    }

    @Test func aRevokedPartitionsUnfinishedWorkIsProcessedByItsNewOwner() throws {
        let environment = try LocalEnvironment(partitions: 4)
        defer { environment.close() }
        let count = 40
        try environment.produceRequests(Self.requests(count))
        // A's APNs takes every request and never answers; B's answers at once.
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        let answering = try APNsSimulator(configuration: environment.credentials.simulatorConfiguration())
        try answering.start()
        defer { answering.close() }
        let yaml = environment.configurationYAML(groupID: "e2e-moved")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 3s")
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
        let port = "127.0.0.1:\(environment.simulator.port)"
        let secondConfiguration = try BridgeConfiguration.parse(
            yaml: yaml.replacingOccurrences(of: port, with: "127.0.0.1:\(answering.port)"), environment: [:])

        // A takes everything and holds it.
        let first = try BackgroundPipeline(configuration: configuration)
        defer { first.stop() }
        // A's revocation waits 3 s for work that never finishes: on purpose, so `/healthz` must
        // not call the consumer stalled meanwhile.
        let status = try BridgeStatusServer(pipeline: first.pipeline, host: "127.0.0.1", port: 0,
                                            stallThreshold: .milliseconds(1_500))
        defer { status.close() }
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.notificationsAwaitingAPNs == count })

        // B joins: A's revoked partitions leave their work uncommitted, and B takes it again.
        // The hand-over usually takes a few seconds. Once, in a CI run, the mock cluster's
        // cooperative rebalances gave B an empty assignment every 5 s for 55 s after A had
        // revoked, and B got the partitions 60 s after A had been assigned (librdkafka's
        // `socket.timeout.ms` is 60 s; the cause was not confirmed): the wait allows for that;
        // B never getting them still fails.
        let second = try BackgroundPipeline(configuration: secondConfiguration)
        defer { second.stop() }
        var unhealthy: [String] = []
        var lastProbe = ContinuousClock.now
        #expect(waitFor(timeout: .seconds(90)) {
            if ContinuousClock.now - lastProbe >= .milliseconds(200) {
                lastProbe = .now
                if let answer = HTTPTestClient.get(port: status.port, "/healthz"), answer.status != 200 {
                    unhealthy.append("\(answer.status) \(answer.body)")
                }
            }
            return second.pipeline.assignedPartitionCount == 2
        })
        #expect(unhealthy.isEmpty, "\(unhealthy)")
        let moved = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count / 2, timeoutMilliseconds: 60_000, settleMilliseconds: 1_000)
        // Every result comes from B (A's streams stay unanswered): exactly its two partitions.
        #expect(moved.count == count / 2)
        #expect(Set(moved.map(\.partition)).count <= 2)
        #expect(first.pipeline.notificationsAwaitingAPNs == count)  // A still holds all it took
        #expect(waitFor(timeout: .seconds(20)) { (try? environment.committedRequestCount(groupID: "e2e-moved")) == Int64(count / 2) })

        // A stops with its work unanswered: nothing of it is committed; B takes the rest.
        #expect(first.stop() == 0)
        let all = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000, settleMilliseconds: 1_000)
        #expect(all.count == count)
        #expect(Set(Self.requestIDs(all)) == Set((0..<count).map { "g\($0)" }))
        #expect(waitFor(timeout: .seconds(20)) { (try? environment.committedRequestCount(groupID: "e2e-moved")) == Int64(count) })
        #expect(second.stop() == 0)
    }

    /// A member joining the group takes partitions whose notifications are still at APNs: the
    /// revocation waits for them (up to `shutdown_timeout`), their offsets are committed as they
    /// leave, and the new owner starts after them. Before, it read those records again and every
    /// notification in flight at a rebalance went to its device twice.
    @Test(arguments: [false, true])
    func aRevokedPartitionsWorkInFlightFinishesBeforeItLeaves(exactlyOnce: Bool) throws {
        let environment = try LocalEnvironment(partitions: 4)
        defer { environment.close() }
        let count = 40
        try environment.produceRequests(Self.requests(count))
        // Longer than the mock cluster takes to revoke (about 5 s after the first member got
        // the partitions), by less than the revocation's wait (half the test's 6 s session).
        try environment.simulator.setFaults(APNsSimulatorFaults(latency: .seconds(7)))
        let groupID = "e2e-handover-\(exactlyOnce)"
        let yaml = environment.configurationYAML(groupID: groupID, exactlyOnce: exactlyOnce)
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 30s")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])

        let first = try BackgroundPipeline(configuration: configuration)
        defer { first.stop() }
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.notificationsAwaitingAPNs == count })

        let second = try BackgroundPipeline(configuration: configuration)
        defer { second.stop() }
        #expect(waitFor(timeout: .seconds(90)) { second.pipeline.assignedPartitionCount == 2 })
        // The partitions came over once their work was done and committed: the new owner had
        // nothing to do again (before, it admitted their records again and sent them anew).
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000, settleMilliseconds: 500)
        #expect(results.count == count, "\(results.count) results for \(count) requests")
        #expect(Set(Self.requestIDs(results)) == Set((0..<count).map { "g\($0)" }))
        #expect(waitFor(timeout: .seconds(20)) { (try? environment.committedRequestCount(groupID: groupID)) == Int64(count) })
        // The first member waited for its leaving work and committed it as the partitions left,
        // unless the group refused that commit: librdkafka's mock cluster refuses commits while
        // members rejoin, and a member whose SyncGroup reaches it after the leader's must rejoin
        // (Kafka's coordinator accepts commits then). At least once the refusal is counted and
        // the drained records come again; exactly once their offsets went with the transaction.
        if first.pipeline.handOverCommitRefusalCount == 0 {
            #expect(second.pipeline.peakInFlight == 0, "the new owner took \(second.pipeline.peakInFlight) notifications again")
        } else {
            // The one hand-over's commit refused (`aRefusedHandOverCommitIsCountedAndNothingIsLost`).
            #expect(!exactlyOnce)
            #expect(first.pipeline.handOverCommitRefusalCount == 1)
        }
        #expect(first.stop() == 0)
        #expect(second.stop() == 0)
    }

    /// The start of the hand-over scenarios: `count` requests on the environment's partitions
    /// and a first member holding every one of them at APNs, which answers 12 s after a
    /// notification went out. The revocation a second member's arrival brings comes when the
    /// mock cluster's join round ends, the 10 s session less a second after that member joins:
    /// the answers come after it and within the hand-over's 5 s bound (half the session) as long
    /// as the second member joins within 3 s, so the drain ends and its commit is sent. Nothing
    /// is stored while every record waits for APNs, so no commit is sent before the hand-over's
    /// (nor after it, without `periodicCommits`).
    private static func firstMemberWithWorkAtAPNs(
        in environment: LocalEnvironment, groupID: String, count: Int, periodicCommits: Bool = true
    ) throws -> (BridgeConfiguration, BackgroundPipeline) {
        try environment.produceRequests(requests(count))
        try environment.simulator.setFaults(APNsSimulatorFaults(latency: .seconds(12)))
        var yaml = environment.configurationYAML(groupID: groupID)
            .replacingOccurrences(of: "session.timeout.ms: 6000", with: "session.timeout.ms: 10000")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 30s")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
        if !periodicCommits {
            yaml = yaml.replacingOccurrences(of: "auto.commit.interval.ms: 200", with: "auto.commit.interval.ms: 600000")
        }
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
        let first = try BackgroundPipeline(configuration: configuration)
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.notificationsAwaitingAPNs == count })
        return (configuration, first)
    }

    /// At least once, a hand-over commit the group refuses (here an injected REBALANCE_IN_PROGRESS
    /// answer, the first commit after the work went to APNs): the revoking member says so and
    /// counts it; librdkafka's commit as the partitions leave tries once more (here it goes
    /// through), and nothing is lost or left uncommitted.
    @Test func aRefusedHandOverCommitIsCountedAndNothingIsLost() throws {
        let environment = try LocalEnvironment(partitions: 4)
        defer { environment.close() }
        let count = 40
        let (configuration, first) = try Self.firstMemberWithWorkAtAPNs(in: environment, groupID: "e2e-handover-refused", count: count)
        defer { first.stop() }
        // The first commit since the work went to APNs is the hand-over's: the error meets it.
        environment.kafka.pushRequestErrors(apiKey: MockKafkaCluster.APIKey.offsetCommit, errors: [KafkaError.Code.rebalanceInProgress])

        let second = try BackgroundPipeline(configuration: configuration)
        defer { second.stop() }
        #expect(waitFor(timeout: .seconds(90)) { second.pipeline.assignedPartitionCount == 2 })
        #expect(waitFor(timeout: .seconds(30)) { first.pipeline.handOverCommitRefusalCount == 1 })
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000, settleMilliseconds: 500)
        #expect(Set(Self.requestIDs(results)) == Set((0..<count).map { "g\($0)" }))
        #expect(waitFor(timeout: .seconds(30)) { (try? environment.committedRequestCount(groupID: "e2e-handover-refused")) == Int64(count) })
        #expect(first.stop() == 0)
        #expect(second.stop() == 0)
    }

    /// At least once, a hand-over commit the group coordinator takes but does not answer in time
    /// (its answer held back 25 s on the mock broker): the revoking member stops waiting for it
    /// at the hand-over's bound (half of the 10 s session, the drain's wait included) and leaves
    /// the rebalance callback, rather than staying in it until the answer comes (librdkafka's
    /// own commit waits that long). The coordinator took the commit when it arrived, so nothing
    /// is lost or left uncommitted.
    @Test func aHandOverCommitTheCoordinatorDoesNotAnswerEndsAtTheHandOversBound() throws {
        let environment = try LocalEnvironment(partitions: 4)
        defer { environment.close() }
        let count = 40
        // No periodic commit meets the held answer first: the hand-over's is the first commit.
        let (configuration, first) = try Self.firstMemberWithWorkAtAPNs(
            in: environment, groupID: "e2e-handover-unanswered", count: count, periodicCommits: false)
        defer { first.stop() }
        environment.kafka.pushBrokerRequestErrors(
            broker: 1, apiKey: MockKafkaCluster.APIKey.offsetCommit, errors: [0], rttMilliseconds: 25_000)

        let started = ContinuousClock.now
        let second = try BackgroundPipeline(configuration: configuration)
        defer { second.stop() }
        // The rebalance about 9 s in, the bound 5 s later: without it, the callback would wait
        // for the answer until about 37 s in (sent with the APNs answers, 12 s in).
        #expect(waitFor(timeout: .seconds(22)) { first.pipeline.handOverCommitTimeoutCount == 1 })
        #expect(ContinuousClock.now - started < .seconds(22))
        #expect(first.pipeline.handOverCommitRefusalCount == 0)
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 60_000, settleMilliseconds: 500)
        #expect(Set(Self.requestIDs(results)) == Set((0..<count).map { "g\($0)" }))
        #expect(first.stop() == 0)
        #expect(second.stop() == 0)
        #expect(waitFor(timeout: .seconds(30)) { (try? environment.committedRequestCount(groupID: "e2e-handover-unanswered")) == Int64(count) })
    }

    /// Also exactly once, where outputs leave memory only when their transaction commits: the
    /// in-flight work must drain through the committer, or admission stops for good at the limit,
    /// also when transactions fail and their batches are produced again (two aborts here).
    @Test(arguments: [false, true])
    func inFlightWorkNeverExceedsTheLimitByMoreThanOneRequest(exactlyOnce: Bool) throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let fanOut = 25
        let records = (0..<60).map { index in
            let tokens = (0..<fanOut).map { "\"\(Self.token(index * 100 + $0))\"" }.joined(separator: ",")
            return DemoWorkload.Record(
                key: Array("f\(index)".utf8), value: Array(#"{"id":"f\#(index)","tokens":[\#(tokens)],"payload":{"aps":{}}}"#.utf8))
        }
        try environment.produceRequests(records)
        try environment.simulator.setFaults(APNsSimulatorFaults(latency: .milliseconds(50)))
        if exactlyOnce {
            // TOPIC_AUTHORIZATION_FAILED twice: two transactions abort before anything is written.
            environment.kafka.pushRequestErrors(apiKey: MockKafkaCluster.APIKey.addPartitionsToTransaction, errors: [29, 29])
        }
        let limit = 60
        let runner = try BackgroundPipeline(configuration: try environment.configuration(
            groupID: "e2e-bound", exactlyOnce: exactlyOnce, extra: "limits: {max_in_flight: \(limit)}"))
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: records.count * fanOut, timeoutMilliseconds: 60_000, settleMilliseconds: 500)
        #expect(results.count == records.count * fanOut)
        if exactlyOnce {
            #expect(runner.pipeline.committer?.transactionCounts.aborted == 2)
        }
        // Every output's weight was given back: nothing is counted as still waiting for Kafka.
        #expect(waitFor(timeout: .seconds(10)) { runner.pipeline.publisher.pendingCount == 0 })
        #expect(runner.stop() == 0)
        // The first poll alone would have brought all 1,500 notifications in without admission.
        #expect(runner.pipeline.peakInFlight >= limit)
        #expect(runner.pipeline.peakInFlight < limit + fanOut, "peak \(runner.pipeline.peakInFlight)")
    }

    /// SIGTERM and SIGINT alike, with every notification still waiting for APNs: the work is
    /// drained, its results published and its offsets committed, exit 0. The SIGINT run finds
    /// its configuration through `$APNS_BRIDGE_CONFIG`, as the contract's command line allows.
    @Test(arguments: [SIGTERM, SIGINT])
    func aStopSignalWithWorkInFlightDrainsItAndCommits(signal: Int32) throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let count = 20
        try environment.produceRequests(Self.requests(count))
        try environment.simulator.setFaults(APNsSimulatorFaults(latency: .seconds(2)))  // answers arrive during the drain
        let yaml = environment.configurationYAML(groupID: "e2e-drain", extra: "log: {level: debug, format: text}")
        let configFile = try TemporaryFile(contents: yaml)
        let log = try ScratchDirectory()
        defer { log.remove() }

        let process = signal == SIGINT
            ? try BridgeBinary.start(["run"], environment: ["APNS_BRIDGE_CONFIG": configFile.path], logFile: log.file("bridge.log"))
            : try BridgeBinary.start(["run", "--config", configFile.path], logFile: log.file("bridge.log"))
        defer { BridgeBinary.stop(process) }
        #expect(waitFor(timeout: .seconds(30)) { BridgeBinary.count("request admitted", in: log.file("bridge.log")) == count })
        #expect(waitFor(timeout: .seconds(10)) { environment.simulator.statistics.requestsReceived >= count })
        kill(process.processIdentifier, signal)
        #expect(BridgeBinary.wait(process, seconds: 30) == 0, "\(BridgeBinary.tail(of: log.file("bridge.log")))")

        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: count, timeoutMilliseconds: 10_000, settleMilliseconds: 500)
        #expect(results.count == count)
        #expect(try environment.committedRequestCount(groupID: "e2e-drain") == Int64(count))
    }
}
