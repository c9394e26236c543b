import Bridge
import BridgeLocal
import Foundation
import Kafka
import Testing
import TestSupport

/// `kafka.exactly_once: true` with the bridge as a real subprocess: a `read_committed` reader
/// sees every result, invalid-token record and dead letter exactly once, and only for input
/// records whose offsets are committed.
///
/// librdkafka 2.0.2's mock cluster keeps no transaction outcome (see `KafkaTransactionTests`:
/// aborted or unfinished transactions' records are served to `read_committed` readers and
/// transactional offsets are not committed), so what a kill -9 leaves behind cannot be judged
/// against it (the kill -9 test asserts that nothing is lost and records the exactness as a known
/// issue); the others cover what it can show: a whole run, an aborted transaction produced
/// again, partitions moving between two instances, and a fenced instance stopping.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ExactlyOnceProcessTests {
    @Test func everyOutputOnceAlsoAfterAnAbortedTransaction() throws {
        let workload = DemoWorkload(count: 200, seed: 21)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        try environment.produceRequests(workload.records)
        let configFile = try TemporaryFile(contents: environment.configurationYAML(groupID: "eos-run", exactlyOnce: true))
        let log = NSTemporaryDirectory() + "eos-run-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        // The first transaction fails with an abortable error (TOPIC_AUTHORIZATION_FAILED for a
        // partition): the bridge aborts it and produces the same batch again.
        environment.kafka.pushRequestErrors(apiKey: MockKafkaCluster.APIKey.addPartitionsToTransaction, errors: [29])

        let bridge = try BridgeBinary.start(
            ["run", "--config", configFile.path], environment: ["APNS_BRIDGE_INSTANCE_ID": "solo"], logFile: log)
        defer { BridgeBinary.stop(bridge) }
        _ = try OutputLedger.read(environment, waitingFor: workload, seconds: 90)
        kill(bridge.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(bridge, seconds: 30) == 0)

        let ledger = try OutputLedger.readSettled(environment)
        ledger.expectEveryOutputExactlyOnce(workload)
        #expect(try environment.committedRequestCount(groupID: "eos-run") == Int64(workload.records.count))
        let errors = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(errors.contains("transaction failed; aborting it"))
    }

    /// Partitions move from one instance to another between two stretches of work. On the mock
    /// cluster the first instance must be idle while the group rebalances: the mock refuses every
    /// offset commit for the seconds a rebalance takes and keeps no transactional offsets, so work
    /// finished in that window would be redone by the new owner and, the mock showing every
    /// record, seen twice. (Against Kafka the transaction carries the offsets; a revocation with
    /// work in flight is covered by `TransactionCommitterTests`.)
    @Test func everyOutputOnceWhenASecondInstanceTakesOverPartitions() throws {
        let workload = DemoWorkload(count: 600, seed: 22)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        let logs = try ScratchDirectory(prefix: "eos-rebalance")
        defer { logs.remove() }
        let records = workload.records
        let firstIDs = Set(records[..<300].map { String(decoding: $0.key, as: UTF8.self) })
        let firstResults = workload.expectedOutcomes.keys.filter { firstIDs.contains(String($0.split(separator: "|")[0])) }.count
        try environment.produceRequests(Array(records[..<300]))
        let configFile = try TemporaryFile(contents: environment.configurationYAML(
            groupID: "eos-rebalance", exactlyOnce: true, extra: "limits: {max_in_flight: 50}"))

        let first = try BridgeBinary.start(
            ["run", "--config", configFile.path], environment: ["APNS_BRIDGE_INSTANCE_ID": "a"], logFile: logs.file("a.log"))
        defer { BridgeBinary.stop(first) }
        let early = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: firstResults, timeoutMilliseconds: 60_000)
        #expect(early.count == firstResults)
        let second = try BridgeBinary.start(
            ["run", "--config", configFile.path], environment: ["APNS_BRIDGE_INSTANCE_ID": "b"], logFile: logs.file("b.log"))
        defer { BridgeBinary.stop(second) }
        // A cooperative rebalance first gives the joining member an empty assignment (logged too)
        // while the first member revokes; the joiner gets those partitions in the next round.
        let handedOver = #""message":"partitions assigned","kafka.partitions":"\#(environment.requestTopic)/"#
        #expect(waitFor(timeout: .seconds(90)) {
            Self.log(logs.file("a.log"), contains: "partitions revoked") && Self.log(logs.file("b.log"), contains: handedOver)
        })
        try environment.produceRequests(Array(records[300...]))
        #expect(waitFor(timeout: .seconds(120), every: .milliseconds(250)) {
            (try? environment.committedRequestCount(groupID: "eos-rebalance")) == Int64(records.count)
        })
        // One after the other, so that each leaves a settled group.
        kill(second.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(second, seconds: 30) == 0)
        kill(first.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(first, seconds: 30) == 0)

        let ledger = try OutputLedger.readSettled(environment)
        ledger.expectEveryOutputExactlyOnce(workload)
    }

    /// Three kill -9 mid-stream, each followed by a restart of the same instance, then a clean
    /// stop. Nothing may be lost (asserted); a `read_committed` reader must see each output once,
    /// which librdkafka 2.0.2's mock cluster cannot show (it serves the records of transactions
    /// a kill left unfinished and ignores transactional offsets), so that part is recorded as a
    /// known issue while the mock keeps no transaction outcome.
    @Test func threeKillsMidStreamLoseNothing() throws {
        let workload = DemoWorkload(count: 1200, seed: 24)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        try environment.produceRequests(workload.records)
        let configFile = try TemporaryFile(contents: environment.configurationYAML(
            groupID: "eos-kills", exactlyOnce: true, extra: "limits: {max_in_flight: 50}"))
        let arguments = ["run", "--config", configFile.path]
        let instance = ["APNS_BRIDGE_INSTANCE_ID": "killed"]

        for fraction in [0.15, 0.4, 0.65] {
            let bridge = try BridgeBinary.start(arguments, environment: instance)
            let target = Int(Double(workload.expectedResults) * fraction)
            let seen = try KafkaTopicReader.readAll(
                bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
                expectedCount: target, timeoutMilliseconds: 90_000)
            kill(bridge.processIdentifier, SIGKILL)
            _ = BridgeBinary.wait(bridge, seconds: 10)
            #expect(seen.count >= target)
        }
        let last = try BridgeBinary.start(arguments, environment: instance)
        defer { BridgeBinary.stop(last) }
        #expect(waitFor(timeout: .seconds(120), every: .milliseconds(250)) {
            (try? environment.committedRequestCount(groupID: "eos-kills")) == Int64(workload.records.count)
        })
        kill(last.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(last, seconds: 30) == 0)

        let ledger = try OutputLedger.readSettled(environment)
        #expect(Set(ledger.resultKeys) == Set(workload.expectedOutcomes.keys))  // nothing lost
        #expect(Set(ledger.deadLetterSources.map { "\($0.partition)/\($0.offset)" }).count == workload.expectedDeadLetters)
        #expect(Set(ledger.invalidTokenKeys).count == workload.expectedInvalidTokens)  // nor any invalid token
        withKnownIssue("librdkafka 2.0.2's mock cluster serves unfinished transactions to read_committed readers",
                       isIntermittent: true) {
            ledger.expectEveryOutputExactlyOnce(workload)
        }
    }

    static func log(_ path: String, contains text: String) -> Bool {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains(text)
    }

    /// Every output goes to one partition (single-token requests, one partition per topic), so
    /// the fenced transaction fails at its first `AddPartitionsToTxn`, before any of its records
    /// is written: what is visible is exactly what committed transactions wrote, even on the mock
    /// cluster, which would otherwise show a failed transaction's records.
    @Test func aFencedInstanceStopsWithExitOneAndCommitsNothingMore() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let records = (0..<2000).map { index in
            DemoWorkload.Record(
                key: Array("f-\(index)".utf8),
                value: Array(#"{"id":"f-\#(index)","app":"demo","token":"\#(String(repeating: "7e", count: 32))","payload":{"aps":{}}}"#.utf8))
        }
        try environment.produceRequests(records)
        let configFile = try TemporaryFile(contents: environment.configurationYAML(
            groupID: "eos-fenced", exactlyOnce: true, extra: "limits: {max_in_flight: 1}"))
        let logs = try ScratchDirectory(prefix: "eos-fenced")
        defer { logs.remove() }

        let bridge = try BridgeBinary.start(
            ["run", "--config", configFile.path], environment: ["APNS_BRIDGE_INSTANCE_ID": "zombie"],
            logFile: logs.file("bridge.log"))
        defer { BridgeBinary.stop(bridge) }
        let early = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: 20, timeoutMilliseconds: 60_000)
        #expect(early.count == 20)
        // What the transaction coordinator answers once a newer producer with the same
        // transactional.id has registered (the mock cluster does not fence by itself).
        environment.kafka.pushRequestErrors(
            apiKey: MockKafkaCluster.APIKey.addPartitionsToTransaction, errors: [KafkaError.Code.producerFenced])
        #expect(BridgeBinary.wait(bridge, seconds: 60) == 1)
        let errors = (try? String(contentsOfFile: logs.file("bridge.log"), encoding: .utf8)) ?? ""
        #expect(errors.contains("fenced"))
        #expect(errors.contains("APNS_BRIDGE_INSTANCE_ID"))

        // Exactly the outputs of the committed input records are visible: all of every record
        // whose offset was committed, none of one whose offset was not.
        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "eos-fenced",
            topic: environment.requestTopic, partitions: 1)
        let committedCount = Int(try #require(committed[0]))
        #expect(committedCount >= 20)
        #expect(committedCount < records.count)
        let results = try KafkaTopicReader.readToEnd(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            timeoutMilliseconds: 60_000)
        let requestIDs = results.map { String(decoding: $0.key ?? [], as: UTF8.self) }
        #expect(requestIDs.count == committedCount)
        #expect(Set(requestIDs) == Set((0..<committedCount).map { "f-\($0)" }))
    }
}

/// What a `read_committed` reader finds on the three output topics.
struct OutputLedger {
    /// `request_id|token` of every result.
    var resultKeys: [String] = []
    /// `request_id|token` of every invalid-token record.
    var invalidTokenKeys: [String] = []
    /// The input record of every dead letter.
    var deadLetterSources: [(partition: Int32, offset: Int64)] = []

    /// Waits (up to `seconds`) until the results topic holds at least the workload's results.
    static func read(_ environment: LocalEnvironment, waitingFor workload: DemoWorkload, seconds: Int) throws -> [KafkaMessage] {
        try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: workload.expectedResults, timeoutMilliseconds: seconds * 1000)
    }

    /// Reads every output after the bridges stopped: each topic to its end, so a late duplicate
    /// is seen as surely as an expected record.
    static func readSettled(_ environment: LocalEnvironment) throws -> OutputLedger {
        func all(_ topic: String) throws -> [[String: Any]] {
            try KafkaTopicReader.readToEnd(
                bootstrapServers: environment.kafka.bootstrapServers, topic: topic, timeoutMilliseconds: 60_000
            ).map { message in
                (try? JSONSerialization.jsonObject(with: Data(message.value ?? [])) as? [String: Any]) ?? [:]
            }
        }
        var ledger = OutputLedger()
        for result in try all(environment.resultsTopic) {
            ledger.resultKeys.append(DemoWorkload.outcomeKey(
                requestID: result["request_id"] as? String ?? "?", token: result["token"] as? String ?? "?"))
        }
        for record in try all(environment.invalidTokensTopic) {
            ledger.invalidTokenKeys.append(DemoWorkload.outcomeKey(
                requestID: record["request_id"] as? String ?? "?", token: record["token"] as? String ?? "?"))
        }
        for deadLetter in try all(environment.deadLetterTopic) {
            let source = deadLetter["source"] as? [String: Any] ?? [:]
            ledger.deadLetterSources.append((
                partition: Int32(source["partition"] as? Int ?? -1), offset: Int64(source["offset"] as? Int ?? -1)))
        }
        return ledger
    }

    /// Every expected result, invalid-token record and dead letter, each exactly once.
    func expectEveryOutputExactlyOnce(_ workload: DemoWorkload, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(resultKeys.count == workload.expectedResults, sourceLocation: sourceLocation)
        #expect(Set(resultKeys) == Set(workload.expectedOutcomes.keys), sourceLocation: sourceLocation)
        #expect(invalidTokenKeys.count == workload.expectedInvalidTokens, sourceLocation: sourceLocation)
        #expect(Set(invalidTokenKeys).count == invalidTokenKeys.count, sourceLocation: sourceLocation)
        #expect(deadLetterSources.count == workload.expectedDeadLetters, sourceLocation: sourceLocation)
        #expect(Set(deadLetterSources.map { "\($0.partition)/\($0.offset)" }).count == deadLetterSources.count,
                sourceLocation: sourceLocation)
    }
}
