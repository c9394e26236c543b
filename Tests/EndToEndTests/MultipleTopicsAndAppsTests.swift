import APNs
import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import Observability
import TestSupport
import Testing

/// One instance, two input topics and two apps (contract §1, §2, §3): requests are routed by
/// `app` to that app's bundle id and environment, and every output is keyed and headed as the
/// contract says, whichever topic the request came from.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct MultipleTopicsAndAppsTests {
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "a", count: 64 - hex.count) + hex
    }

    @Test func requestsFromTwoTopicsAreRoutedByApp() throws {
        // Every token is unregistered: each answer carries the topic and environment it was sent with.
        let count = 16
        let unregistered = Dictionary(uniqueKeysWithValues: (0..<count).map { (Self.token($0), Int64(1_700_000_000_000 + $0)) })
        let environment = try LocalEnvironment(partitions: 2, unregisteredTokens: unregistered)
        defer { environment.close() }
        let secondTopic = "apns.requests.second"
        try environment.kafka.createTopic(secondTopic, partitions: 3)

        let producer = try KafkaProducer(
            bootstrapServers: environment.kafka.bootstrapServers, properties: [:], logger: .init(label: "test.producer"),
            deliveryHandler: { _, error in #expect(error == nil) })
        var expected: [String: (app: String, topic: String)] = [:]
        for index in 0..<count {
            let app = index % 2 == 0 ? "chat" : "news"
            let topic = index % 4 < 2 ? environment.requestTopic : secondTopic
            let id = "m\(index)"
            expected[id] = (app, topic)
            try producer.produce(
                topic: topic, key: Array(id.utf8),
                value: Array(#"{"id":"\#(id)","app":"\#(app)","token":"\#(Self.token(index))","payload":{"aps":{}}}"#.utf8),
                headers: [], tag: UInt64(index))
        }
        // With two apps `app` is required, and must name one of them.
        try producer.produce(topic: secondTopic, key: Array("no-app".utf8),
                             value: Array(#"{"token":"\#(Self.token(99))","payload":{}}"#.utf8), headers: [], tag: 98)
        try producer.produce(topic: environment.requestTopic, key: Array("bad-app".utf8),
                             value: Array(#"{"app":"nope","token":"\#(Self.token(99))","payload":{}}"#.utf8), headers: [], tag: 99)
        #expect(producer.flush(timeoutMilliseconds: 20_000))
        producer.close()

        let key = "{type: token, key_file: \(environment.credentials.authKeyFile), key_id: \(environment.credentials.keyID), team_id: \(environment.credentials.teamID)}"
        let yaml = environment.configurationYAML(groupID: "e2e-two-apps")
            .replacingOccurrences(of: "topics: [\(environment.requestTopic)]", with: "topics: [\(environment.requestTopic), \(secondTopic)]")
            .replacingOccurrences(of: "  - name: demo\n    bundle_id: com.example.demo\n    environment: production",
                                  with: "  - name: chat\n    bundle_id: com.example.chat\n    environment: production\n    auth: \(key)\n  - name: news\n    bundle_id: com.example.news\n    environment: sandbox")
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
        #expect(configuration.apps.map(\.name) == ["chat", "news"])
        #expect(configuration.kafka.topics.count == 2)
        let configFile = try TemporaryFile(contents: yaml)
        let process = try BridgeBinary.start(["run", "--config", configFile.path])
        defer { BridgeBinary.stop(process) }

        let servers = environment.kafka.bootstrapServers
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: servers, topic: environment.resultsTopic, expectedCount: count, timeoutMilliseconds: 60_000,
            settleMilliseconds: 1_000)
        let invalidTokens = try KafkaTopicReader.readAll(
            bootstrapServers: servers, topic: environment.invalidTokensTopic, expectedCount: count, timeoutMilliseconds: 20_000,
            settleMilliseconds: 500)
        let deadLetters = try KafkaTopicReader.readAll(
            bootstrapServers: servers, topic: environment.deadLetterTopic, expectedCount: 2, timeoutMilliseconds: 20_000,
            settleMilliseconds: 500)
        #expect(results.count == count)
        #expect(invalidTokens.count == count)
        #expect(deadLetters.count == 2)

        for result in results {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.value ?? [])) as? [String: Any])
            let id = try #require(object["request_id"] as? String)
            let want = try #require(expected[id])
            #expect(result.key == Array(id.utf8))
            #expect(result.header("request-id") == Array(id.utf8))
            #expect(object["app"] as? String == want.app)
            #expect((object["source"] as? [String: Any])?["topic"] as? String == want.topic)
            #expect(object["outcome"] as? String == "rejected")
            #expect(object["reason"] as? String == "Unregistered")
        }
        for record in invalidTokens {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
            let id = try #require(object["request_id"] as? String)
            let want = try #require(expected[id])
            #expect(record.key == (object["token"] as? String).map { Array($0.utf8) })
            #expect(record.header("request-id") == Array(id.utf8))
            #expect(object["app"] as? String == want.app)
            // Sent with the app's bundle id and in the app's environment.
            #expect(object["topic"] as? String == (want.app == "chat" ? "com.example.chat" : "com.example.news"))
            #expect(object["environment"] as? String == (want.app == "chat" ? "production" : "sandbox"))
        }
        let codes = try deadLetters.map { letter -> String in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(letter.value ?? [])) as? [String: Any])
            return object["error"] as? String ?? ""
        }
        #expect(codes.contains("unknown_app"))
        #expect(Set(deadLetters.compactMap(\.key)) == [Array("no-app".utf8), Array("bad-app".utf8)])

        // Every offset of both topics committed.
        #expect(waitFor(timeout: .seconds(20)) {
            let first = (try? KafkaTopicReader.committedOffsets(
                bootstrapServers: servers, groupID: "e2e-two-apps", topic: environment.requestTopic, partitions: 2)) ?? [:]
            let second = (try? KafkaTopicReader.committedOffsets(
                bootstrapServers: servers, groupID: "e2e-two-apps", topic: secondTopic, partitions: 3)) ?? [:]
            return first.values.reduce(0, +) + second.values.reduce(0, +) == Int64(count + 2)
        })
        kill(process.processIdentifier, SIGTERM)
        #expect(BridgeBinary.wait(process, seconds: 30) == 0)
    }
}
