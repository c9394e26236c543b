import Foundation
import Kafka
import Testing
import TestSupport

/// The bridge binary under steady load for `SOAK_SECONDS` against the APNs simulator (its own
/// process, with GOAWAYs, dropped connections, 503s and latency) and librdkafka's mock cluster:
/// once a minute the bridge's RSS, open descriptors, threads and throughput are printed from
/// /proc/<pid>; at the end they must be flat, every notification must have exactly one result,
/// every offset must be committed and the bridge must stop cleanly.
///
/// Runs only when `SOAK_SECONDS` is set: `make soak` (10 minutes), `make soak-ci` (3 minutes,
/// part of `make test`). docs/RELIABILITY.md explains the figures.
@Suite(.serialized, .timeLimit(.minutes(30)))
struct SoakTests {
    static let partitions: Int32 = 16
    /// The simulator's faults: every connection sees a GOAWAY or an abrupt close every few
    /// seconds at the default rate, one answer in 500 is a 503, every answer waits 5 ms.
    static let simulatorFaults = ["--latency", "5ms", "--goaway-every", "20000", "--drop-every", "30011", "--fail", "503:0.002"]

    @Test(.enabled(if: SoakSettings.fromEnvironment != nil))
    func theBridgeStaysFlatAndLosesNothingUnderFaults() throws {
        let settings = try #require(SoakSettings.fromEnvironment)
        let scratch = try ScratchDirectory(prefix: "apns-bridge-soak")
        defer { scratch.remove() }
        let (simulator, port) = try SimulatorProcessTests.startSimulator(directory: scratch.path, Self.simulatorFaults)
        defer { BridgeBinary.stop(simulator) }
        let kafka = try MockKafkaCluster(brokers: 1)
        defer { kafka.close() }
        let topics = (requests: "apns.requests", results: "apns.results", invalid: "apns.invalid-tokens", dead: "apns.dead-letters")
        for topic in [topics.requests, topics.results, topics.invalid, topics.dead] {
            try kafka.createTopic(topic, partitions: Self.partitions)
        }
        let configFile = try TemporaryFile(contents: """
        kafka:
          brokers: \(kafka.bootstrapServers)
          group_id: soak
          consumer: {session.timeout.ms: 10000, heartbeat.interval.ms: 1000, auto.commit.interval.ms: 1000}
        apns:
          production_url: https://127.0.0.1:\(port)
          ca_file: \(scratch.path)/ca.pem
        apps:
          - name: soak
            bundle_id: com.example.soak
            connections: 2
            auth: {type: token, key_file: \(scratch.path)/AuthKey_ABC123DEFG.p8, key_id: ABC123DEFG, team_id: TEAM123456}
        http: {listen: "127.0.0.1:0"}
        log: {level: warning, format: text}
        """)
        let load = try SoakLoad(bootstrapServers: kafka.bootstrapServers, requestTopic: topics.requests, resultsTopic: topics.results)
        defer { load.close() }
        let bridge = try CapturedProcess(BridgeBinary.url, ["run", "--config", configFile.path],
                                         environment: settings.preload.map { ["LD_PRELOAD": $0] } ?? [:])
        let pid = bridge.process.processIdentifier
        report("soak: \(settings.seconds) s at \(settings.rate) notifications/s, bridge pid \(pid)"
               + (settings.preload.map { " with \($0) preloaded" } ?? "")
               + ", simulator faults \(Self.simulatorFaults.joined(separator: " "))")

        // Under load: produce on schedule, read results, sample once per interval.
        var samples: [SoakSample] = []
        let started = ContinuousClock.now
        var resultsAtLastSample = 0
        while bridge.process.isRunning {
            let elapsed = (ContinuousClock.now - started).seconds
            try load.produceDue(elapsedSeconds: min(elapsed, Double(settings.seconds)), rate: settings.rate)
            try load.readResults(timeoutMilliseconds: 10)
            let sampleNumber = samples.count + 1
            if elapsed >= Double(sampleNumber * settings.sampleSeconds), let process = ProcessSample(pid: pid) {
                let sample = SoakSample(
                    seconds: sampleNumber * settings.sampleSeconds, process: process,
                    throughput: Double(load.resultsSeen - resultsAtLastSample) / Double(settings.sampleSeconds))
                resultsAtLastSample = load.resultsSeen
                samples.append(sample)
                report(sample.line + "  (results \(load.resultsSeen) of \(load.produced * SoakLoad.tokensPerRequest) sent: \(load.outcomes))")
            }
            if elapsed >= Double(settings.seconds) { break }
        }
        try #require(bridge.process.isRunning, "the bridge exited during the soak: \(bridge.errorOutput.suffix(2000))")
        if let preload = settings.preload {
            // ld.so only warns about a preload it cannot find; the soak must not pass on glibc's allocator then.
            let loaded = ProcessSample.mappedFiles(pid: pid).contains { $0.hasSuffix("/" + preload) }
            #expect(loaded, "\(preload) is not loaded in the bridge (Debian package libjemalloc2?): \(bridge.errorOutput.prefix(500))")
        }

        // Drain: every notification answered, every offset committed, then a clean stop.
        #expect(load.flush())
        #expect(load.producerFailures == 0)
        let expected = load.produced * SoakLoad.tokensPerRequest
        let drainDeadline = ContinuousClock.now + .seconds(120)
        while load.resultsSeen < expected, ContinuousClock.now < drainDeadline {
            try load.readResults(timeoutMilliseconds: 100)
        }
        let committed = waitFor(timeout: .seconds(60), every: .milliseconds(500)) {
            let offsets = try? KafkaTopicReader.committedOffsets(
                bootstrapServers: kafka.bootstrapServers, groupID: "soak", topic: topics.requests, partitions: Self.partitions)
            return offsets?.values.reduce(0, +) == Int64(load.produced)
        }
        #expect(committed, "not every request offset was committed")
        #expect(bridge.stop() == 0, "\(bridge.errorOutput.suffix(2000))")
        // Settle: anything more now is a duplicate.
        while try load.readResults(timeoutMilliseconds: 3_000) > 0 {}

        report("soak: \(load.produced) requests, \(expected) notifications, \(load.resultsSeen) results \(load.outcomes); missing \(load.missing), duplicated \(load.duplicated)")
        #expect(load.missing == 0)
        #expect(load.duplicated == 0)
        #expect(load.unreadable == 0)
        #expect(load.resultsSeen == expected)
        // 503s, GOAWAYs and dropped connections are retried: every notification is delivered.
        #expect(load.outcomes == ["delivered": expected], "\(load.outcomes)")

        try #require(samples.count >= 2, "a soak needs at least two samples (SOAK_SECONDS ≥ 2 × SOAK_SAMPLE_SECONDS)")
        let problems = SoakSample.flatnessProblems(samples: samples, offeredRate: settings.rate)
        #expect(problems.isEmpty, "\(problems)")
    }
}

/// Prints a line at once, also when standard output is a file or a pipe (CI logs).
private func report(_ line: String) {
    print(line)
    fflush(nil)  // every C stream, standard output included
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
