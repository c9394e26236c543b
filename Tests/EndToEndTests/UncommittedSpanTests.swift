import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import Observability
import TestSupport
import Testing

/// Offsets are committed in order: a notification that cannot finish holds its partition's
/// commit. The records completing behind it are bounded per partition, not kept without end.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct UncommittedSpanTests {
    /// A record that waits for an unreachable endpoint holds its partition: the records behind it
    /// complete up to the bound, then the partition pauses; once it expires (its result says so)
    /// the commit moves and the partition drains.
    @Test func aPartitionHeldByAnUnfinishedRecordPausesAtTheBoundAndResumesAfterIt() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let maxInFlight = 10
        let bound = maxInFlight * BridgePipeline.uncommittedSpanFactor
        let later = 4 * bound
        let token = String(repeating: "6a", count: 32)
        // The first request goes to the sandbox, which is unreachable: it waits until its
        // expiration passes. Every later one is answered at once by the production endpoint.
        let expiration = Int(Date().timeIntervalSince1970) + 15
        var records = [DemoWorkload.Record(
            key: Array("held".utf8),
            value: Array(#"{"id":"held","token":"\#(token)","environment":"sandbox","expiration":\#(expiration),"payload":{}}"#.utf8))]
        for index in 0..<later {
            records.append(DemoWorkload.Record(key: Array("r\(index)".utf8), value: Array(#"{"id":"r\#(index)","token":"\#(token)","payload":{}}"#.utf8)))
        }
        try environment.produceRequests(records)
        let yaml = environment.configurationYAML(groupID: "e2e-span", extra: "limits: {max_in_flight: \(maxInFlight)}")
            .replacingOccurrences(of: "sandbox_url: https://127.0.0.1:\(environment.simulator.port)", with: "sandbox_url: https://127.0.0.1:1")
        #expect(yaml.contains("sandbox_url: https://127.0.0.1:1"))
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        defer { runner.stop() }

        // The records behind the held one complete until the partition holds the bound, then it pauses.
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.spanPausedPartitionCount == 1 })
        let span = runner.pipeline.largestUncommittedSpan
        #expect(span > bound && span < later, "\(span) records consumed and not committable")
        // Only the held one waits for APNs (once the last ones sent when the pause came are answered).
        #expect(waitFor(timeout: .seconds(10)) { runner.pipeline.notificationsAwaitingAPNs == 1 })

        // The held notification expires: the partition's commit moves, it resumes and drains.
        #expect(waitFor(timeout: .seconds(30)) { (try? environment.committedRequestCount(groupID: "e2e-span")) == Int64(later + 1) })
        #expect(runner.pipeline.spanPausedPartitionCount == 0)
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: later + 1, timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        #expect(results.count == later + 1)
        try Self.expectExpiredUnsent(["held"], in: results)
    }

    /// The bound is on all partitions together: with an unfinished record at the head of each
    /// of four partitions, the records held behind them stay near one bound, not four.
    @Test func theBoundHoldsOverAllPartitionsTogether() throws {
        let partitionCount = 4
        let environment = try LocalEnvironment(partitions: Int32(partitionCount))
        defer { environment.close() }
        let maxInFlight = 10
        let bound = maxInFlight * BridgePipeline.uncommittedSpanFactor
        let laterPerPartition = 2 * bound
        let token = String(repeating: "6b", count: 32)
        let expiration = Int(Date().timeIntervalSince1970) + 12
        let producer = try KafkaProducer(
            bootstrapServers: environment.kafka.bootstrapServers, properties: ["linger.ms": "5"],
            logger: Logger(label: "test.producer"), deliveryHandler: { _, error in #expect(error == nil) })
        for partition in 0..<partitionCount {
            // Each partition starts with a request to the unreachable sandbox that waits until
            // its expiration; everything after it is answered at once by production.
            try producer.produce(
                topic: environment.requestTopic, key: [UInt8]?.none,
                value: Array(#"{"id":"held-\#(partition)","token":"\#(token)","environment":"sandbox","expiration":\#(expiration),"payload":{}}"#.utf8),
                headers: [], tag: 0, partition: Int32(partition))
            for index in 0..<laterPerPartition {
                try producer.produce(
                    topic: environment.requestTopic, key: [UInt8]?.none,
                    value: Array(#"{"id":"p\#(partition)-\#(index)","token":"\#(token)","payload":{}}"#.utf8),
                    headers: [], tag: 0, partition: Int32(partition))
            }
        }
        #expect(producer.flush(timeoutMilliseconds: 30_000))
        producer.close()
        let total = partitionCount * (laterPerPartition + 1)
        let yaml = environment.configurationYAML(groupID: "e2e-span-all", extra: "limits: {max_in_flight: \(maxInFlight)}")
            .replacingOccurrences(of: "sandbox_url: https://127.0.0.1:\(environment.simulator.port)", with: "sandbox_url: https://127.0.0.1:1")
        #expect(yaml.contains("sandbox_url: https://127.0.0.1:1"))
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        defer { runner.stop() }

        // Every partition ends up paused behind its unfinished record, and together they hold
        // at most the bound and each other partition's share of it: under two bounds (a bound
        // for each would let them hold four).
        #expect(waitFor(timeout: .seconds(30)) {
            runner.pipeline.spanPausedPartitionCount == partitionCount && runner.pipeline.notificationsAwaitingAPNs == partitionCount
        })
        let held = runner.pipeline.uncommittedRecordCount
        #expect(held > bound && held < 3 * bound, "\(held) records consumed and not committable")

        // The unfinished ones expire: every commit moves, the partitions resume and drain.
        #expect(waitFor(timeout: .seconds(40)) { (try? environment.committedRequestCount(groupID: "e2e-span-all")) == Int64(total) })
        #expect(runner.pipeline.spanPausedPartitionCount == 0)
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: total, timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        #expect(results.count == total)
        try Self.expectExpiredUnsent((0..<partitionCount).map { "held-\($0)" }, in: results)
    }

    /// Exactly once, the outputs of records completing behind an unfinished one wait in memory
    /// (a transaction carries a partition's outputs in offset order). They are bounded by pausing
    /// that partition alone, not by `max_in_flight`, which would stop every partition: the other
    /// partition's records, those there at the start and those produced later, are committed
    /// while the held one still waits.
    @Test func exactlyOnceAPartitionHeldByAnUnfinishedRecordDoesNotStopTheOthers() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let maxInFlight = 10
        let perPartition = 200
        let token = String(repeating: "6c", count: 32)
        let expiration = Int(Date().timeIntervalSince1970) + 20
        let produce = { (records: [(partition: Int32, value: String)]) throws in
            let producer = try KafkaProducer(
                bootstrapServers: environment.kafka.bootstrapServers, properties: ["linger.ms": "5"],
                logger: Logger(label: "test.producer"), deliveryHandler: { _, error in #expect(error == nil) })
            for record in records {
                try producer.produce(topic: environment.requestTopic, key: [UInt8]?.none, value: Array(record.value.utf8),
                                     headers: [], tag: 0, partition: record.partition)
            }
            #expect(producer.flush(timeoutMilliseconds: 30_000))
            producer.close()
        }
        // Partition 0 starts with a request to the unreachable sandbox, which waits until its
        // expiration; everything else is answered at once by production.
        var first: [(partition: Int32, value: String)] = [
            (0, #"{"id":"held","token":"\#(token)","environment":"sandbox","expiration":\#(expiration),"payload":{}}"#)]
        for partition in Int32(0)...1 {
            for index in 0..<perPartition {
                first.append((partition, #"{"id":"p\#(partition)-\#(index)","token":"\#(token)","payload":{}}"#))
            }
        }
        try produce(first)
        let yaml = environment.configurationYAML(groupID: "e2e-span-eos", exactlyOnce: true,
                                                 extra: "limits: {max_in_flight: \(maxInFlight)}")
            .replacingOccurrences(of: "sandbox_url: https://127.0.0.1:\(environment.simulator.port)", with: "sandbox_url: https://127.0.0.1:1")
        #expect(yaml.contains("sandbox_url: https://127.0.0.1:1"))
        let runner = try BackgroundPipeline(configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]))
        defer { runner.stop() }
        let committed = {
            (try? KafkaTopicReader.committedOffsets(bootstrapServers: environment.kafka.bootstrapServers,
                                                    groupID: "e2e-span-eos", topic: environment.requestTopic, partitions: 2)) ?? [:]
        }

        // Records flow once the producer's transactions are initialised (until then every
        // partition is held back, and that counts as a pause).
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.inFlightCount > 0 })
        let pausesAtTheStart = runner.pipeline.fetchPauseCount
        // The held partition pauses alone; then more records come for the other one only.
        #expect(waitFor(timeout: .seconds(10)) { runner.pipeline.spanPausedPartitionCount == 1 })
        try produce((0..<perPartition).map { (1, #"{"id":"late-\#($0)","token":"\#(token)","payload":{}}"#) })
        #expect(waitFor(timeout: .seconds(10)) { committed()[1] == Int64(2 * perPartition) },
                "partition 1 committed to \(committed()[1] ?? -1) of \(2 * perPartition)")
        // ...while the held record still waits: nothing of partition 0 is committed yet.
        #expect(runner.pipeline.notificationsAwaitingAPNs == 1)
        #expect((committed()[0] ?? 0) == 0)
        // The one pause is the bound's, of partition 0 (after half the grace): it came before
        // the in-flight limit, which the held outputs filled, paused every partition (after the
        // whole grace).
        #expect(runner.pipeline.fetchPauseCount - pausesAtTheStart <= 1,
                "\(runner.pipeline.fetchPauseCount - pausesAtTheStart) pauses, the bound's included")

        // The held notification expires: partition 0 resumes and drains, every result once.
        let total = 3 * perPartition + 1
        #expect(waitFor(timeout: .seconds(30)) { committed().values.reduce(0, +) == Int64(total) })
        #expect(runner.pipeline.spanPausedPartitionCount == 0)
        let results = try KafkaTopicReader.readAll(
            bootstrapServers: environment.kafka.bootstrapServers, topic: environment.resultsTopic,
            expectedCount: total, timeoutMilliseconds: 30_000, settleMilliseconds: 500)
        #expect(results.count == total)
        try Self.expectExpiredUnsent(["held"], in: results)
    }

    /// Exactly once, a record APNs answers late (not never) holds the outputs behind it only for
    /// as long: the partition is not paused for it, and nothing else is either.
    @Test func exactlyOnceARecordAnsweredLateDoesNotPauseItsPartition() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        var slowConfiguration = environment.credentials.simulatorConfiguration()
        slowConfiguration.faults.latency = .milliseconds(300)
        let slow = try APNsSimulator(configuration: slowConfiguration)
        try slow.start()
        defer { slow.close() }
        let maxInFlight = 40
        let token = String(repeating: "6d", count: 32)
        // Every 50th request goes to the sandbox, answered after 300 ms; the rest at once. Each
        // slow one holds the outputs of the records completing behind it past half the limit
        // (the bound) before the limit stops the consumer.
        let records = (0..<300).map { index in
            let environmentField = index % 50 == 0 ? #","environment":"sandbox""# : ""
            return DemoWorkload.Record(
                key: Array("r\(index)".utf8),
                value: Array(#"{"id":"r\#(index)","token":"\#(token)"\#(environmentField),"payload":{}}"#.utf8))
        }
        try environment.produceRequests(records)
        let yaml = environment.configurationYAML(groupID: "e2e-span-slow", exactlyOnce: true,
                                                 extra: "limits: {max_in_flight: \(maxInFlight)}")
            .replacingOccurrences(of: "sandbox_url: https://127.0.0.1:\(environment.simulator.port)",
                                  with: "sandbox_url: https://127.0.0.1:\(slow.port)")
        #expect(yaml.contains("sandbox_url: https://127.0.0.1:\(slow.port)"))
        let runner = try BackgroundPipeline(
            configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]), backpressureGrace: .seconds(5))
        defer { runner.stop() }
        // Records flow once the producer's transactions are initialised (a hold until then counts as a pause).
        #expect(waitFor(timeout: .seconds(30)) { runner.pipeline.inFlightCount > 0 })
        let pausesAtTheStart = runner.pipeline.fetchPauseCount

        #expect(waitFor(timeout: .seconds(60)) {
            (try? environment.committedRequestCount(groupID: "e2e-span-slow")) == Int64(records.count)
        })
        #expect(slow.statistics.requestsReceived == 6)
        #expect(runner.pipeline.fetchPauseCount == pausesAtTheStart)
        #expect(runner.stop() == 0)
    }

    /// Exactly once, outputs held behind an unfinished record under the bound (its partition not
    /// paused for them) do not keep every partition paused after the in-flight limit paused them:
    /// fetching resumes once the work that can drain is down to half the limit.
    @Test func exactlyOnceOutputsHeldUnderTheBoundDoNotKeepTheLimitsPause() throws {
        let environment = try LocalEnvironment(partitions: 2)
        defer { environment.close() }
        let maxInFlight = 10
        let token = String(repeating: "6e", count: 32)
        let (runner, pausesAtTheStart) = try Self.startWithOutputsHeld(
            environment, groupID: "e2e-span-limit", maxInFlight: maxInFlight, token: token)
        defer { runner.stop() }
        let committed = {
            (try? KafkaTopicReader.committedOffsets(bootstrapServers: environment.kafka.bootstrapServers,
                                                    groupID: "e2e-span-limit", topic: environment.requestTopic, partitions: 2)) ?? [:]
        }

        // APNs slows down while partition 1 gets records: the limit is reached and held past the
        // grace, and every partition pauses.
        try environment.simulator.setFaults(APNsSimulatorFaults(latency: .seconds(2)))
        let later = 2 * maxInFlight
        try Self.produce(Self.requests(later, prefix: "p1", token: token), to: 1, in: environment)
        #expect(waitFor(timeout: .seconds(10)) { runner.pipeline.pausedPartitionCount == 2 })
        try environment.simulator.setFaults(APNsSimulatorFaults())

        // Once the slow answers are in, partition 1 drains while the held record still waits.
        #expect(waitFor(timeout: .seconds(15)) { committed()[1] == Int64(later) },
                "partition 1 committed to \(committed()[1] ?? -1) of \(later)")
        #expect(runner.pipeline.spanPausedPartitionCount == 0)
        #expect(runner.pipeline.notificationsAwaitingAPNs == 1)
        // While the work fills the limit, the held outputs do not resume fetching only for the
        // limit to pause it again a grace later: paused once for the slow answers (a second
        // time at most, for the 20 records that follow).
        let pauses = runner.pipeline.fetchPauseCount - pausesAtTheStart
        #expect(pauses >= 1 && pauses <= 2, "every partition paused \(pauses) times")
    }

    /// Exactly once, a partition the in-flight limit holds paused, and that the bound pauses too
    /// (the answers that come in meanwhile join the outputs held behind its unfinished record),
    /// stopped fetching once: one pause counted. It stays paused for the bound once the limit
    /// lets go.
    @Test func exactlyOnceTheBoundPausingAPartitionTheLimitHoldsCountsNoSecondPause() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let maxInFlight = 10
        let token = String(repeating: "6f", count: 32)
        let (runner, pausesAtTheStart) = try Self.startWithOutputsHeld(
            environment, groupID: "e2e-span-both", maxInFlight: maxInFlight, token: token)
        defer { runner.stop() }

        // APNs slows down while more records come: the limit pauses the partition...
        try environment.simulator.setFaults(APNsSimulatorFaults(latency: .seconds(2)))
        try Self.produce(Self.requests(2 * maxInFlight, prefix: "b", token: token), to: 0, in: environment)
        #expect(waitFor(timeout: .seconds(10)) { runner.pipeline.pausedPartitionCount == 1 })
        try environment.simulator.setFaults(APNsSimulatorFaults())
        #expect(runner.pipeline.spanPausedPartitionCount == 0)

        // ...the slow answers, held behind the unfinished record, take it over the bound, and
        // once that pause has taken them out of the limit's work, the limit lets go.
        #expect(waitFor(timeout: .seconds(15)) { runner.pipeline.spanPausedPartitionCount == 1 })
        #expect(waitFor(timeout: .seconds(15)) { runner.pipeline.pausedPartitionCount == 0 })
        #expect(runner.pipeline.spanPausedPartitionCount == 1)
        #expect(runner.pipeline.fetchPauseCount - pausesAtTheStart == 1)
    }

    /// `count` requests for production, answered at once, with ids `<prefix>-<index>`.
    static func requests(_ count: Int, prefix: String, token: String) -> [String] {
        (0..<count).map { #"{"id":"\#(prefix)-\#($0)","token":"\#(token)","payload":{}}"# }
    }

    /// Produces `values` to one partition of the request topic.
    static func produce(_ values: [String], to partition: Int32, in environment: LocalEnvironment) throws {
        let producer = try KafkaProducer(
            bootstrapServers: environment.kafka.bootstrapServers, properties: ["linger.ms": "5"],
            logger: Logger(label: "test.producer"), deliveryHandler: { _, error in #expect(error == nil) })
        for value in values {
            try producer.produce(topic: environment.requestTopic, key: [UInt8]?.none, value: Array(value.utf8),
                                 headers: [], tag: 0, partition: partition)
        }
        #expect(producer.flush(timeoutMilliseconds: 30_000))
        producer.close()
    }

    /// Exactly once, with `max_in_flight` and a backpressure grace of 200 ms, a bridge whose
    /// partition 0 starts with a request to the unreachable sandbox (port 1), which waits for a
    /// connection until its expiration 40 s away, then as many answered at once as the bound
    /// (half the limit) allows without pausing the partition. Returned once it holds them all,
    /// with the fetch pauses counted by then (one while transactions were initialised, if any).
    static func startWithOutputsHeld(_ environment: LocalEnvironment, groupID: String, maxInFlight: Int,
                                     token: String) throws -> (BackgroundPipeline, pausesAtTheStart: Int) {
        let expiration = Int(Date().timeIntervalSince1970) + 40
        try produce([#"{"id":"held","token":"\#(token)","environment":"sandbox","expiration":\#(expiration),"payload":{}}"#]
                    + requests(maxInFlight / 2, prefix: "p0", token: token), to: 0, in: environment)
        let yaml = environment.configurationYAML(groupID: groupID, exactlyOnce: true,
                                                 extra: "limits: {max_in_flight: \(maxInFlight)}")
            .replacingOccurrences(of: "sandbox_url: https://127.0.0.1:\(environment.simulator.port)", with: "sandbox_url: https://127.0.0.1:1")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 2s")
        #expect(yaml.contains("sandbox_url: https://127.0.0.1:1") && yaml.contains("shutdown_timeout: 2s"))
        let runner = try BackgroundPipeline(
            configuration: try BridgeConfiguration.parse(yaml: yaml, environment: [:]), backpressureGrace: .milliseconds(200))
        #expect(waitFor(timeout: .seconds(10)) { runner.pipeline.inFlightCount == 1 + maxInFlight / 2 })
        return (runner, runner.pipeline.fetchPauseCount)
    }

    /// Each of the requests `ids` has one result, and it says what becomes of a notification
    /// whose expiration passes while it waits for a connection (contract §6): `expired`, never
    /// sent (0 attempts, no status).
    static func expectExpiredUnsent(_ ids: [String], in results: [KafkaMessage],
                                    sourceLocation: SourceLocation = #_sourceLocation) throws {
        for id in ids {
            let matching = results.filter { $0.key == Array(id.utf8) }
            #expect(matching.count == 1, "\(id): \(matching.count) results", sourceLocation: sourceLocation)
            guard let value = matching.first?.value else { continue }
            let result = try #require(try JSONSerialization.jsonObject(with: Data(value)) as? [String: Any],
                                      sourceLocation: sourceLocation)
            #expect(result["outcome"] as? String == "expired", "\(id): \(result)", sourceLocation: sourceLocation)
            #expect(result["attempts"] as? Int == 0, "\(id): \(result)", sourceLocation: sourceLocation)
            #expect(result["status"] is NSNull, "\(id): \(result)", sourceLocation: sourceLocation)
        }
    }
}
