import Bridge
import BridgeLocal
import Foundation
import JSON
import Kafka
import Observability
import TestSupport

/// One Kafka fault scenario over the whole pipeline: a `DemoWorkload` in two halves on a mock
/// cluster of several brokers, the first half fully processed and committed before the fault,
/// the second half produced into it; then every output topic is read until it settles and checked
/// against the workload, and the group's committed offsets against what was produced.
struct KafkaFaultScenario {
    let environment: LocalEnvironment
    let workload: DemoWorkload
    let groupID: String
    private let seed: UInt64

    /// Starts the environment (`brokers` brokers, 4 partitions per topic).
    init(groupID: String, brokers: Int = 3, requests: Int = 160, seed: UInt64 = 11) throws {
        workload = DemoWorkload(count: requests, seed: seed)
        self.seed = seed
        environment = try LocalEnvironment(partitions: 4, unregisteredTokens: workload.unregisteredTokens, brokers: brokers)
        self.groupID = groupID
    }

    var firstHalf: ArraySlice<DemoWorkload.Record> { workload.records.prefix(workload.records.count / 2) }
    var secondHalf: ArraySlice<DemoWorkload.Record> { workload.records.dropFirst(workload.records.count / 2) }
    /// The workload of `firstHalf` alone, with its expected counts (a workload's records do not
    /// depend on how many follow them).
    var firstHalfWorkload: DemoWorkload { DemoWorkload(count: workload.records.count / 2, seed: seed) }

    /// The bridge's configuration, with the consumer's session timeout set to
    /// `sessionTimeoutMilliseconds` and `producer` added to the producer's properties.
    func configurationYAML(sessionTimeoutMilliseconds: Int = 6000, producer: [String: String] = [:]) -> String {
        environment.configurationYAML(groupID: groupID, producer: producer)
            .replacingOccurrences(of: "session.timeout.ms: 6000", with: "session.timeout.ms: \(sessionTimeoutMilliseconds)")
    }

    /// Sum of the group's committed offsets over the request topic (nil while Kafka does not answer).
    func committedCount() -> Int64? {
        try? environment.committedRequestCount(groupID: groupID)
    }

    /// The group's committed offsets by partition of the request topic.
    func committedOffsets() throws -> [Int32: Int64] {
        try KafkaTopicReader.committedOffsets(
            bootstrapServers: environment.kafka.bootstrapServers, groupID: groupID,
            topic: environment.requestTopic, partitions: environment.partitions)
    }

    /// Waits (up to `timeout`) until the group has committed exactly `count` records.
    func waitUntilCommitted(_ count: Int, timeout: Duration = .seconds(90)) -> Bool {
        waitFor(timeout: timeout, every: .milliseconds(250)) { committedCount() == Int64(count) }
    }

    /// Reads the three output topics from the beginning, each until the expected count arrived
    /// (up to 30 s) and then for 3 s more, so that a duplicate is counted too; and the request
    /// topic to its end, for where each input record sits.
    /// - Parameters:
    ///   - expected: the workload whose outputs are due (default: the whole one).
    ///   - allowingDuplicates: for runs where at least once may repeat outputs (a crash).
    func settledOutputs(of expected: DemoWorkload? = nil, allowingDuplicates: Bool = false) -> SettledOutputs {
        let due = expected ?? workload
        let topics = [environment.resultsTopic, environment.deadLetterTopic, environment.invalidTokensTopic]
        let expected = [due.expectedResults, due.expectedDeadLetters, due.expectedInvalidTokens]
        let read = Locked<[Int: [KafkaMessage]]>([:])
        DispatchQueue.concurrentPerform(iterations: topics.count + 1) { index in
            let bootstrapServers = environment.kafka.bootstrapServers
            let messages = index == topics.count
                ? (try? KafkaTopicReader.readToEnd(
                    bootstrapServers: bootstrapServers, topic: environment.requestTopic, timeoutMilliseconds: 30_000)) ?? []
                : (try? KafkaTopicReader.readAll(
                    bootstrapServers: bootstrapServers, topic: topics[index],
                    expectedCount: expected[index], timeoutMilliseconds: 30_000, settleMilliseconds: 3_000)) ?? []
            read.withLock { $0[index] = messages }
        }
        let byTopic = read.withLock { $0 }
        let requestPositions = Dictionary(
            (byTopic[topics.count] ?? []).map { (String(decoding: $0.key ?? [], as: UTF8.self), "\($0.partition)/\($0.offset)") },
            uniquingKeysWith: { first, _ in first })
        return SettledOutputs(
            results: byTopic[0] ?? [], deadLetters: byTopic[1] ?? [], invalidTokens: byTopic[2] ?? [],
            requestPositions: requestPositions, allowsDuplicates: allowingDuplicates)
    }

    func close() {
        environment.close()
    }
}

/// What the output topics held once they settled.
struct SettledOutputs {
    let results: [KafkaMessage]
    let deadLetters: [KafkaMessage]
    let invalidTokens: [KafkaMessage]
    /// Where each input record sits in the request topic ("partition/offset"), by its key.
    let requestPositions: [String: String]
    /// Whether a token may have more than one result (after a crash).
    let allowsDuplicates: Bool

    /// Every way these outputs differ from the workload's: a token without its result, with a
    /// wrong outcome or (unless duplicates are allowed) with more than one result; and likewise
    /// for invalid-token records and dead letters.
    func problems(against workload: DemoWorkload, requests: some Collection<DemoWorkload.Record>) -> [String] {
        let ids = Set(requests.compactMap { record -> String? in
            guard let document = try? JSONScanner.parse(record.value) else { return nil }
            return document.root["id"]?.stringValue
        })
        let expected = workload.expectedOutcomes.filter { key, _ in ids.contains(String(key.prefix { $0 != "|" })) }
        var seen: [String: Int] = [:]
        var problems: [String] = []
        for message in results {
            guard let value = message.value, let document = try? JSONScanner.parse(value),
                  let requestID = document.root["request_id"]?.stringValue, let token = document.root["token"]?.stringValue,
                  let outcome = document.root["outcome"]?.stringValue else {
                problems.append("unreadable result at offset \(message.offset)")
                continue
            }
            let key = DemoWorkload.outcomeKey(requestID: requestID, token: token)
            seen[key, default: 0] += 1
            if expected[key]?.rawValue != outcome {
                problems.append("\(key): got \(outcome), expected \(expected[key]?.rawValue ?? "no result")")
            }
        }
        for (key, count) in seen where count > 1 && !allowsDuplicates {
            problems.append("\(key): \(count) results")
        }
        for key in expected.keys where seen[key] == nil {
            problems.append("\(key): no result")
        }
        problems += invalidTokenProblems(expected: expected)
        // The records without any expected result are the unusable ones (a workload's keys are its request ids).
        let requestIDs = Set(workload.expectedOutcomes.keys.map { String($0.prefix { $0 != "|" }) })
        let unusable = requests.map { String(decoding: $0.key, as: UTF8.self) }.filter { !requestIDs.contains($0) }
        problems += deadLetterProblems(due: unusable)
        return problems
    }

    /// A record among `due` (keys of unusable input records) without its dead letter, a dead
    /// letter whose source is not one of them, or (unless duplicates are allowed) two for one record.
    private func deadLetterProblems(due keys: [String]) -> [String] {
        let missing = keys.filter { requestPositions[$0] == nil }.map { "\($0): not found in the request topic" }
        return missing + keyedProblems(
            of: deadLetters, named: "dead letter", due: Set(keys.compactMap { requestPositions[$0] }),
            unexpected: "for a record that is not unusable"
        ) { document in
            guard let source = document.root["source"], let partition = source["partition"]?.int64Value,
                  let offset = source["offset"]?.int64Value else { return nil }
            return "\(partition)/\(offset)"
        }
    }

    /// A token answered as invalid (unregistered or malformed) without its invalid-token record,
    /// a record for a token that is not invalid, or (unless duplicates are allowed) two records.
    private func invalidTokenProblems(expected: [String: PushOutcome]) -> [String] {
        let due = Set(expected.filter { $0.value == .rejected || $0.value == .invalid }.keys)
        return keyedProblems(
            of: invalidTokens, named: "invalid-token record", due: due, unexpected: "for a token that is not invalid"
        ) { document in
            guard let requestID = document.root["request_id"]?.stringValue,
                  let token = document.root["token"]?.stringValue else { return nil }
            return DemoWorkload.outcomeKey(requestID: requestID, token: token)
        }
    }

    /// The records of one output topic against the keys due on it, each record's key read by
    /// `key` (nil: unreadable): a record whose key is not due, a due key without a record, or
    /// (unless duplicates are allowed) a key with two records.
    private func keyedProblems(of messages: [KafkaMessage], named name: String, due: Set<String>, unexpected: String,
                               key: (JSONDocument) -> String?) -> [String] {
        var seen: [String: Int] = [:]
        var problems: [String] = []
        for message in messages {
            guard let value = message.value, let document = try? JSONScanner.parse(value), let key = key(document) else {
                problems.append("unreadable \(name) at offset \(message.offset)")
                continue
            }
            seen[key, default: 0] += 1
            if !due.contains(key) { problems.append("\(key): \(name) \(unexpected)") }
        }
        for (key, count) in seen where count > 1 && !allowsDuplicates {
            problems.append("\(key): \(count) \(name)s")
        }
        for key in due where seen[key] == nil {
            problems.append("\(key): no \(name)")
        }
        return problems
    }
}
