import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import Observability
import TestSupport
import Testing

/// The whole path on real libraries and sockets: librdkafka's mock cluster, the APNs simulator
/// over TLS on 127.0.0.1, and the pipeline in between.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct PipelineEndToEndTests {
    /// At least once, and exactly once (outputs produced in transactions with their offsets).
    @Test(arguments: [false, true])
    func everyTokenGetsItsExpectedResultAndEveryOffsetIsCommitted(exactlyOnce: Bool) throws {
        let workload = DemoWorkload(count: 120, seed: 7)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }

        let report = try DemoRunner.run(
            workload: workload, environment: environment,
            configuration: try environment.configuration(groupID: "e2e-demo", exactlyOnce: exactlyOnce)
        )

        #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
        #expect(report.results == workload.expectedResults)
        #expect(report.deadLetters == workload.expectedDeadLetters)
        #expect(report.invalidTokens == workload.expectedInvalidTokens)
        #expect(report.committedRecords == Int64(workload.records.count))
        #expect(report.pipelineExitCode == 0)
        let expectedByOutcome = Dictionary(grouping: workload.expectedOutcomes.values, by: { $0 }).mapValues(\.count)
        for outcome in PushOutcome.allCases {
            #expect(report.outcomes[outcome, default: 0] == expectedByOutcome[outcome, default: 0], "\(outcome)")
        }
    }

    /// With no grace the consumer pauses its partitions as soon as the limit is reached; with the
    /// default grace it first waits for the work to drain. Either way nothing is lost.
    @Test(arguments: [Duration.zero, .seconds(1)])
    func aTinyInFlightLimitHoldsBackFetchingWithoutLosingAnything(grace: Duration) throws {
        let workload = DemoWorkload(count: 40, seed: 3)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        let configuration = try environment.configuration(groupID: "e2e-backpressure", extra: "limits: {max_in_flight: 2}")
        #expect(configuration.limits.maxInFlight == 2)

        let report = try DemoRunner.run(
            workload: workload, environment: environment, configuration: configuration, backpressureGrace: grace
        )

        #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
        #expect(report.results == workload.expectedResults)
        #expect(report.committedRecords == Int64(workload.records.count))
        #expect(report.pipelineExitCode == 0)
        if grace == .zero {
            #expect(report.fetchPauses > 0)
        }
        // Either way admission holds the work to the limit plus one request (at most four tokens).
        #expect(report.peakInFlight >= 2)
        #expect(report.peakInFlight < 2 + 4, "peak \(report.peakInFlight)")
    }

    /// A dead letter weighs in in-flight work by the bytes it carries (one per KiB), so
    /// `limits.max_in_flight` bounds the memory of dead letters waiting for Kafka too: with a
    /// limit of 100, each 300 KB poison record is admitted alone, after the previous one's dead
    /// letter was written. Counted as one output each, all five would be in flight at once.
    @Test(arguments: [false, true])
    func largeDeadLettersCountByTheirWeight(exactlyOnce: Bool) throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let poison = (0..<5).map { index in
            DemoWorkload.Record(key: Array("p\(index)".utf8), value: Array(repeating: UInt8(ascii: "x"), count: 300_000))
        }
        try environment.produceRequests(poison)
        let runner = try BackgroundPipeline(configuration: try environment.configuration(
            groupID: "e2e-weighed-\(exactlyOnce)", exactlyOnce: exactlyOnce, extra: "limits: {max_in_flight: 100}"))
        defer { runner.stop() }
        #expect(waitFor(timeout: .seconds(60)) {
            (try? environment.committedRequestCount(groupID: "e2e-weighed-\(exactlyOnce)")) == Int64(poison.count)
        })
        let peak = runner.pipeline.peakInFlight
        #expect(runner.stop() == 0)

        let deadLetters = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.deadLetterTopic,
            expectedCount: poison.count, timeoutMilliseconds: 30_000, settleMilliseconds: 300)
        #expect(deadLetters.count == poison.count)
        // One dead letter of 300,000 + 2 bytes weighs 293: in flight alone, never two at once.
        #expect(peak == 293, "peak in-flight work \(peak)")
    }

    /// A limit that is reached and drained over and over while APNs answers promptly never
    /// pauses fetching when the grace outlasts every drain, in either mode. (Exactly-once mode
    /// counts work in two places, APNs and the transaction's buffer; a result moving from one
    /// to the other between the two reads used to look like work above the limit right after
    /// a drain and paused the partitions, which costs librdkafka's prefetch.)
    @Test(arguments: [false, true])
    func aBusyHealthyPipelineNeverPausesFetching(exactlyOnce: Bool) throws {
        let workload = DemoWorkload(count: 4000, seed: 11)
        let environment = try LocalEnvironment(unregisteredTokens: workload.unregisteredTokens)
        defer { environment.close() }
        let configuration = try environment.configuration(
            groupID: "e2e-no-pause-\(exactlyOnce)", exactlyOnce: exactlyOnce, extra: "limits: {max_in_flight: 200}")

        let report = try DemoRunner.run(
            workload: workload, environment: environment, configuration: configuration, backpressureGrace: .seconds(60)
        )

        #expect(report.mismatches.isEmpty, "\(report.mismatches.prefix(5))")
        #expect(report.results == workload.expectedResults)
        #expect(report.committedRecords == Int64(workload.records.count))
        // Exactly once, the hold while transactions are initialised counts once if the group
        // assigned partitions first; after that, nothing pauses.
        #expect(report.fetchPausesBeforeFirstResult <= (exactlyOnce ? 1 : 0))
        #expect(report.fetchPauses == report.fetchPausesBeforeFirstResult)
    }

    @Test func offsetsAreNotCommittedWhenKafkaRefusesTheResults() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let records = (0..<5).map { index in
            DemoWorkload.Record(
                key: Array("r\(index)".utf8),
                value: Array(#"{"token":"\#(String(repeating: "7e", count: 32))","payload":{"aps":{}}}"#.utf8)
            )
        }
        try environment.produceRequests(records)
        // From now on every Produce request fails permanently: no result can be acknowledged.
        environment.kafka.pushRequestErrors(
            apiKey: MockKafkaCluster.APIKey.produce, errors: Array(repeating: 10, count: 500)  // MESSAGE_TOO_LARGE: never retried (TOPIC_AUTHORIZATION_FAILED can crash librdkafka 2.0.2, docs/RELIABILITY.md)
        )

        let runner = try BackgroundPipeline(configuration: try environment.configuration(groupID: "e2e-refused"))
        let pipeline = runner.pipeline
        #expect(waitFor(timeout: .seconds(60)) { pipeline.fatalErrorDescription != nil })
        #expect(pipeline.fatalErrorDescription?.contains("could not be delivered") == true)
        #expect(runner.stop() == 1)

        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "e2e-refused",
            topic: environment.requestTopic, partitions: 1
        )
        #expect(committed[0] == nil)
    }

    @Test func outputRecordsCarryTheContractsKeysHeadersAndFields() throws {
        let unregistered = String(repeating: "ab", count: 32)
        let delivered = String(repeating: "0f", count: 32)
        let environment = try LocalEnvironment(partitions: 1, unregisteredTokens: [unregistered: 1_700_000_000_123])
        defer { environment.close() }
        let requests: [DemoWorkload.Record] = [
            .init(key: Array("k1".utf8), value: Array(#"{"id":"chat-1","tokens":["\#(delivered)","\#(unregistered)","zz"],"payload":{"aps":{"alert":"hi"}}}"#.utf8)),
            .init(key: Array("k2".utf8), value: [0xFF, 0xFE, 0x00]),
        ]
        try environment.produceRequests(requests)

        let runner = try BackgroundPipeline(configuration: try environment.configuration(groupID: "e2e-contract"))
        defer { runner.stop() }

        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic, expectedCount: 3,
            timeoutMilliseconds: 30_000, settleMilliseconds: 500
        )
        let invalid = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.invalidTokensTopic, expectedCount: 2,
            timeoutMilliseconds: 30_000, settleMilliseconds: 500
        )
        let deadLetters = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.deadLetterTopic, expectedCount: 1,
            timeoutMilliseconds: 30_000, settleMilliseconds: 500
        )
        #expect(runner.stop() == 0)

        try #require(results.count == 3)
        var byToken: [String: [String: Any]] = [:]
        for record in results {
            #expect(record.key == Array("chat-1".utf8))
            #expect(record.header("request-id") == Array("chat-1".utf8))
            let json = try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
            byToken[json["token"] as? String ?? ""] = json
        }
        let ok = try #require(byToken[delivered])
        #expect(ok["outcome"] as? String == "delivered")
        #expect(ok["status"] as? Int == 200)
        #expect((ok["apns_id"] as? String)?.count == 36)
        #expect(ok["attempts"] as? Int == 1)
        #expect(ok["app"] as? String == "demo")
        let source = try #require(ok["source"] as? [String: Any])
        #expect(source["topic"] as? String == environment.requestTopic)
        #expect(source["offset"] as? Int == 0)
        let gone = try #require(byToken[unregistered])
        #expect(gone["outcome"] as? String == "rejected")
        #expect(gone["status"] as? Int == 410)
        #expect(gone["reason"] as? String == "Unregistered")
        #expect(gone["unregistered_at"] as? Int == 1_700_000_000_123)
        let malformed = try #require(byToken["zz"])
        #expect(malformed["outcome"] as? String == "invalid")
        #expect(malformed["reason"] as? String == "BadDeviceToken")

        let invalidKeys = Set(invalid.compactMap { $0.key.map { String(decoding: $0, as: UTF8.self) } })
        #expect(invalidKeys == [unregistered, "zz"])
        for record in invalid {
            let json = try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
            #expect(json["topic"] as? String == "com.example.demo")
            #expect(json["request_id"] as? String == "chat-1")
        }

        let deadLetter = try #require(deadLetters.first)
        #expect(deadLetter.key == Array("k2".utf8))
        #expect(deadLetter.header("request-id") == Array("\(environment.requestTopic)/0/1".utf8))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(deadLetter.value ?? [])) as? [String: Any])
        #expect(json["error"] as? String == "invalid_json")
        #expect(json["original_encoding"] as? String == "base64")
        #expect(json["original"] as? String == Data([0xFF, 0xFE, 0x00]).base64EncodedString())

        let committed = try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: "e2e-contract",
            topic: environment.requestTopic, partitions: 1
        )
        #expect(committed[0] == 2)
    }

    /// Each notification goes to its environment's endpoint: the app's (production here) unless
    /// the request names the other, here two simulators on two ports. What only the sandbox
    /// answers (`apns-unique-id`) reaches the results of the notifications sent there, and only
    /// those.
    @Test func eachNotificationGoesToItsEnvironmentsEndpoint() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        var sandboxConfiguration = environment.credentials.simulatorConfiguration()
        sandboxConfiguration.sendsUniqueID = true
        let sandbox = try APNsSimulator(configuration: sandboxConfiguration)
        try sandbox.start()
        defer { sandbox.close() }
        let token = String(repeating: "5c", count: 32)
        let count = 6
        try environment.produceRequests((0..<count).map { index in
            let override = index.isMultiple(of: 2) ? #","environment":"sandbox""# : ""
            return DemoWorkload.Record(
                key: Array("e\(index)".utf8), value: Array(#"{"id":"e\#(index)","token":"\#(token)"\#(override),"payload":{}}"#.utf8))
        })
        let yaml = environment.configurationYAML(groupID: "e2e-environments").replacingOccurrences(
            of: "sandbox_url: https://127.0.0.1:\(environment.simulator.port)", with: "sandbox_url: https://127.0.0.1:\(sandbox.port)")
        #expect(yaml.contains("sandbox_url: https://127.0.0.1:\(sandbox.port)"))
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        defer { runner.stop() }

        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic, expectedCount: count,
            timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        #expect(runner.stop() == 0)
        let byID = try Self.resultsByRequestID(results)
        #expect(byID.count == count)
        for index in 0..<count {
            let json = try #require(byID["e\(index)"])
            #expect(json["outcome"] as? String == "delivered")
            if index.isMultiple(of: 2) {
                #expect((json["apns_unique_id"] as? String)?.count == 36, "e\(index)")
            } else {
                #expect(json["apns_unique_id"] is NSNull, "e\(index)")
            }
        }
        #expect(sandbox.statistics.requestsReceived == count / 2)
        #expect(environment.simulator.statistics.requestsReceived == count / 2)
    }

    /// A token APNs knows as another app's (400 DeviceTokenNotForTopic) is rejected and
    /// published on the invalid-tokens topic (contract §4); pushed to its own app's topic (the
    /// request's `topic` override), the same token is delivered.
    @Test func aTokenOfAnotherAppIsRejectedAndPublishedAsInvalid() throws {
        let token = String(repeating: "7e", count: 32)
        let environment = try LocalEnvironment(partitions: 1, tokenApps: [token: "com.example.other"])
        defer { environment.close() }
        try environment.produceRequests([
            .init(key: Array("a".utf8), value: Array(#"{"id":"wrong-app","token":"\#(token)","payload":{}}"#.utf8)),
            .init(key: Array("b".utf8), value: Array(#"{"id":"own-app","token":"\#(token)","topic":"com.example.other","payload":{}}"#.utf8)),
        ])
        let runner = try BackgroundPipeline(configuration: try environment.configuration(groupID: "e2e-token-app"))
        defer { runner.stop() }
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic, expectedCount: 2,
            timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        let invalid = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.invalidTokensTopic, expectedCount: 1,
            timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        #expect(runner.stop() == 0)

        let byID = try Self.resultsByRequestID(results)
        let wrong = try #require(byID["wrong-app"])
        #expect(wrong["outcome"] as? String == "rejected")
        #expect(wrong["status"] as? Int == 400)
        #expect(wrong["reason"] as? String == "DeviceTokenNotForTopic")
        #expect(byID["own-app"]?["outcome"] as? String == "delivered")
        try #require(invalid.count == 1)
        #expect(invalid[0].key == Array(token.utf8))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(invalid[0].value ?? [])) as? [String: Any])
        #expect(json["reason"] as? String == "DeviceTokenNotForTopic")
        #expect(json["topic"] as? String == "com.example.demo")
        #expect(json["request_id"] as? String == "wrong-app")
    }

    /// Each result record's JSON by its `request_id` (the last one of an id).
    static func resultsByRequestID(_ records: [KafkaMessage]) throws -> [String: [String: Any]] {
        var byID: [String: [String: Any]] = [:]
        for record in records {
            let json = try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
            byID[json["request_id"] as? String ?? ""] = json
        }
        return byID
    }
}
