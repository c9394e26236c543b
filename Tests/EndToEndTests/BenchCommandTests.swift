import Bridge
import BridgeLocal
import Foundation
import Kafka
import Testing

/// `apns-bridge bench` as a process: it completes and reports what it ran. Speed is never asserted.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct BenchCommandTests {
    @Test func smallRunWithoutH2LoadCompletesAndReportsTheNotificationCount() throws {
        let (status, output, errorOutput) = try BridgeBinary.run([
            // Enough work that the peak window spans several of the kernel's 10-ms CPU ticks.
            "bench", "--requests", "1000", "--tokens-per-request", "2", "--skip-h2load",
        ])
        #expect(status == 0, "\(output)\n\(errorOutput)")
        let json = try Self.finalJSON(output)
        #expect(json["complete"] as? Bool == true)
        #expect(json["notifications"] as? Int == 2_000)
        #expect(json["results"] as? Int == 2_000)
        #expect(json["delivered"] as? Int == 2_000)
        // Warm-up, peak and paced requests: every one committed by the bridge process.
        let produced = try #require(json["produced_records"] as? Int)
        #expect(produced >= 2_000)
        #expect(json["committed_offsets"] as? Int == produced)
        #expect(json["bridge_exit_codes"] as? [Int] == [0])
        #expect(json["h2load_requests"] is NSNull)
        // Three peak rounds by default, each checked: their rates are all given.
        #expect(json["rounds"] as? Int == 3)
        #expect((json["rounds_notifications_per_second"] as? [Double])?.count == 3)
        #expect(produced >= 4 * 1_000)
        // The peak's requests were produced while the bridge was stopped: it drained a backlog.
        #expect((json["first_result_ms_after_produced"] as? Int).map { $0 >= 0 } == true)
        // The bridge's CPU comes from its own process, which did the work.
        #expect((json["bridge_cpu_seconds"] as? Double ?? 0) > 0)
        #expect((json["max_rss_mb"] as? Double ?? 0) > 0)
        // The paced run measured the time the bridge adds for its 1,000 requests.
        #expect(json["paced_results"] as? Int == 2_000)
        #expect(json["added_ms_p50"] as? Double != nil && json["added_ms_p99"] as? Double != nil)
    }

    @Test func defaultsAreSingleTokenRequests() throws {
        let (status, output, errorOutput) = try BridgeBinary.run([
            "bench", "--requests", "100", "--skip-h2load", "--skip-paced", "--json",
        ])
        #expect(status == 0, "\(output)\n\(errorOutput)")
        // --json: the JSON line alone on standard output, the rest on standard error.
        #expect(output.split(separator: "\n").count == 1)
        #expect(errorOutput.contains("complete: every notification delivered once"))
        let json = try Self.finalJSON(output)
        #expect(json["tokens_per_request"] as? Int == 1)
        #expect(json["notifications"] as? Int == 100)
        #expect(json["paced_requests_per_second"] is NSNull)
    }

    @Test func twoInstancesShareTheGroupAndEachIsCounted() throws {
        let (status, output, errorOutput) = try BridgeBinary.run([
            "bench", "--requests", "400", "--instances", "2", "--skip-h2load", "--skip-paced", "--json",
        ])
        #expect(status == 0, "\(output)\n\(errorOutput)")
        let json = try Self.finalJSON(output)
        #expect(json["complete"] as? Bool == true)
        #expect(json["bridge_exit_codes"] as? [Int] == [0, 0])
        let rates = try #require(json["instance_notifications_per_second"] as? [Double])
        #expect(rates.count == 2)
        // Each instance's own count (its /metrics): together exactly the run's notifications.
        let counts = try #require(json["instance_notifications"] as? [Int])
        #expect(counts.count == 2 && counts.reduce(0, +) == 400)
    }

    /// `--simulator-latency` and `--simulator-streams` shape the simulator: every result waited
    /// at least the latency (its `latency_ms` includes the APNs round trip), and the run says so.
    @Test func simulatorLatencyAndStreamsAreApplied() throws {
        let (status, output, errorOutput) = try BridgeBinary.run([
            "bench", "--requests", "100", "--skip-h2load", "--skip-paced", "--json", "--connections", "1",
            "--simulator-latency", "30", "--simulator-streams", "20",
        ])
        #expect(status == 0, "\(output)\n\(errorOutput)")
        let json = try Self.finalJSON(output)
        #expect(json["complete"] as? Bool == true)
        #expect(json["simulator_latency_ms"] as? Int == 30)
        #expect(json["simulator_streams"] as? Int == 20)
        #expect((json["latency_ms_p50"] as? Double ?? 0) >= 30)
    }

    /// `--wrapper` starts each instance under a command (for valgrind/perf): here a script that
    /// leaves a mark and runs the rest of its arguments, so the run completes only through it.
    @Test func instancesStartUnderTheWrapperCommand() throws {
        let directory = try LocalFiles.makeTemporaryDirectory(prefix: "bench-wrapper")
        defer { LocalFiles.removeDirectory(directory) }
        let script = directory + "/wrap.sh"
        try "#!/bin/sh\necho wrapped >> \(directory)/marks\nexec \"$@\"\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o700)
        let (status, output, errorOutput) = try BridgeBinary.run([
            "bench", "--requests", "50", "--skip-h2load", "--skip-paced", "--json", "--wrapper", script,
        ])
        #expect(status == 0, "\(output)\n\(errorOutput)")
        #expect(try Self.finalJSON(output)["complete"] as? Bool == true)
        let marks = try String(contentsOfFile: directory + "/marks", encoding: .utf8)
        #expect(marks == "wrapped\n")
    }

    /// The scaled-down form of `make bench-memory`: a backlog of large and single-token requests
    /// behind an unreachable APNs, then the catch-up, measured on a real `apns-bridge run` child.
    @Test func memoryModeMeasuresTheBridgeProcessThroughAnOutageAndTheCatchUp() throws {
        let (status, output, errorOutput) = try BridgeBinary.run([
            "bench", "--memory", "--requests", "10", "--tokens-per-request", "400", "--single-token-requests", "1000",
            "--max-in-flight", "500", "--outage-seconds", "4",
        ])
        #expect(status == 0, "\(output)\n\(errorOutput)")
        #expect(output.contains("= 5000 notifications"))
        #expect(output.contains("1010 of 1010 records committed"))
        #expect(output.contains("exit code 0: OK"))
    }

    @Test func h2loadReferenceGetsOnly2xxAnswersFromTheSimulator() throws {
        guard FileManager.default.isExecutableFile(atPath: H2LoadReference.defaultExecutable) else {
            Issue.record("h2load is missing: scripts/setup installs nghttp2-client")
            return
        }
        let (status, output, errorOutput) = try BridgeBinary.run([
            "bench", "--requests", "50", "--tokens-per-request", "2", "--connections", "2", "--rounds", "3",
        ])
        #expect(status == 0, "\(output)\n\(errorOutput)")
        let json = try Self.finalJSON(output)
        // Three rounds, each with its own h2load run and its own share of it.
        let rates = json["rounds_h2load_requests_per_second"] as? [Double] ?? []
        let shares = json["rounds_share_of_h2load"] as? [Double] ?? []
        #expect(json["rounds"] as? Int == 3 && rates.count == 3 && shares.count == 3)
        #expect((json["rounds_notifications_per_second"] as? [Double])?.count == 3)
        // The figures given are the round's of median share, its h2load run included.
        let median = try #require(json["median_round"] as? Int)
        #expect(json["share_of_h2load"] as? Double == shares.sorted()[1])
        #expect(json["share_of_h2load"] as? Double == shares[median - 1])
        #expect(json["h2load_requests_per_second"] as? Double == rates[median - 1])
        #expect(json["h2load_requests"] as? Int == 100)
        #expect(json["h2load_2xx"] as? Int == 100)
        // h2load's own CPU time (wait4) for those 100 requests.
        #expect((json["h2load_cpu_us_per_request"] as? Double ?? 0) > 0)
        // Every round's results checked: three peak runs and the paced run, each of 100.
        #expect(json["complete"] as? Bool == true)
        #expect((json["produced_records"] as? Int ?? 0) >= 4 * 50)
        #expect(!output.contains("bearer"))
    }

    @Test func outOfRangeOptionsAreUsageErrors() throws {
        #expect(try BridgeBinary.run(["bench", "--requests", "0"]).status == 2)
        #expect(try BridgeBinary.run(["bench", "--connections", "many"]).status == 2)
        #expect(try BridgeBinary.run(["bench", "--rate", "0"]).status == 2)
        #expect(try BridgeBinary.run(["bench", "--instances", "0"]).status == 2)
        #expect(try BridgeBinary.run(["bench", "--rounds", "0"]).status == 2)
        #expect(try BridgeBinary.run(["bench", "--rounds", "10"]).status == 2)
        #expect(try BridgeBinary.run(["bench", "--requests", "1000000", "--tokens-per-request", "100"]).status == 2)
        let (status, output, _) = try BridgeBinary.run(["bench", "--help"])
        #expect(status == 0)
        #expect(output.contains("--skip-h2load"))
    }

    @Test func h2loadSummaryIsParsed() throws {
        let output = """
        starting benchmark...
        finished in 823.45ms, 121440.12 req/s, 9.87MB/s
        requests: 100000 total, 100000 started, 100000 done, 99990 succeeded, 10 failed, 0 errored, 0 timeout
        status codes: 99990 2xx, 0 3xx, 10 4xx, 0 5xx
        """
        let result = try #require(H2LoadReference.parse(output))
        #expect(abs(result.seconds - 0.82345) < 1e-9)
        #expect(result.requestsPerSecond == 121440.12)
        #expect(result.total == 100000 && result.succeeded == 99990 && result.failed == 10)
        #expect(result.status2xx == 99990 && result.status4xx == 10)
        #expect(result.isNearlyAll2xx)
        #expect(H2LoadReference.parse("finished in 1.5s, 10 req/s, 1KB/s\n") == nil)
    }

    @Test func theReportGivesTheRoundOfMedianShare() throws {
        func round(bridge: Int, h2load: Int?) throws -> BenchmarkReport.PeakRound {
            var round = BenchmarkReport.PeakRound()
            round.results = bridge
            round.windowSeconds = 1
            if let h2load {
                let summary = "finished in 1.00s, \(h2load) req/s, 1.00MB/s\n"
                    + "requests: 10 total, 10 started, 10 done, 10 succeeded, 0 failed, 0 errored, 0 timeout\n"
                    + "status codes: 10 2xx, 0 3xx, 0 4xx, 0 5xx\n"
                let parsed = try #require(H2LoadReference.parse(summary))
                round.h2load = parsed
            }
            return round
        }
        var report = BenchmarkReport(settings: BenchmarkSettings(executable: "/bin/true"))
        #expect(report.medianRoundIndex == nil)
        // Shares 0.5, 0.9, 0.7: the last round, though neither its bridge rate nor h2load's is the median.
        report.rounds = [try round(bridge: 50, h2load: 100), try round(bridge: 90, h2load: 100), try round(bridge: 140, h2load: 200)]
        #expect(report.medianRoundIndex == 2)
        #expect(report.peak.shareOfH2Load == 0.7)
        #expect(report.requestsPerSecond == 140)
        // Of an even count, the lower of the middle two (the stricter for the bridge).
        report.rounds.append(try round(bridge: 80, h2load: 100))
        #expect(report.medianRoundIndex == 2)
        // Without h2load in every round: the round of median bridge rate.
        report.rounds = [try round(bridge: 30, h2load: nil), try round(bridge: 10, h2load: 100), try round(bridge: 20, h2load: nil)]
        #expect(report.medianRoundIndex == 2)
    }

    @Test func instancesFetchWithoutTheMockBrokersLongWaitUnlessTold() {
        var settings = BenchmarkSettings(executable: "/bin/true")
        #expect(settings.bridgeConsumerProperties == ["fetch.wait.max.ms": "1"])
        settings.consumerProperties = ["fetch.wait.max.ms": "500", "fetch.min.bytes": "1"]
        #expect(settings.bridgeConsumerProperties == ["fetch.wait.max.ms": "500", "fetch.min.bytes": "1"])
    }

    @Test func partitionsAreSizedForTheMockClustersLimits() {
        // 100,000 results of ~500 bytes need more than the 8 default partitions; 400 need one.
        #expect(MockPartitionBudget.partitionsNeeded(records: 100_000, bytesPerRecord: 460) >= 10)
        #expect(MockPartitionBudget.partitionsNeeded(records: 400, bytesPerRecord: 460) == 1)
        #expect(MockPartitionBudget.partitionsNeeded(records: 1_000_000, bytesPerRecord: 1) >= 17)
        let workload = BenchmarkWorkload(requests: 20_000, tokensPerRequest: 5)
        #expect(workload.expectedResults == 100_000)
        // One run's results, not the peak's and the paced run's together: the earlier run's are
        // read before the next one produces (see the next test for what the mock then drops).
        let warmUpRecords = 20 * 100  // at most 20 warm-up rounds of 100 requests for one instance
        let oneRun = MockPartitionBudget.partitionsNeeded(records: workload.expectedResults + warmUpRecords,
                                                          bytesPerRecord: workload.estimatedResultBytes)
        #expect(BenchmarkRunner.partitionsNeeded(for: workload) == oneRun)
        #expect(oneRun > 8)
        #expect(MockPartitionBudget.partitionsNeeded(records: 2 * workload.expectedResults,
                                                     bytesPerRecord: workload.estimatedResultBytes) > oneRun)
    }

    /// What planning one run at a time relies on: when a later run's records push a partition
    /// past the mock cluster's limit, it drops the earliest records, and a run that fits the
    /// budget stays whole and readable from the topic's start (as the bench reads the paced
    /// run's requests).
    @Test func theMockDropsEarlierRunsAndKeepsTheLatestRunThatFits() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let recordBytes = 1_000
        let perRun = Int(Double(MockPartitionBudget.partitionBytes) * MockPartitionBudget.headroom)
            / (recordBytes + MockPartitionBudget.recordOverheadBytes) - 10
        #expect(MockPartitionBudget.partitionsNeeded(records: perRun, bytesPerRecord: recordBytes) == 1)
        #expect(2 * perRun * recordBytes > MockPartitionBudget.partitionBytes)  // two runs do not fit
        func run(_ name: String) -> [DemoWorkload.Record] {
            (0..<perRun).map { index in
                let key = Array("\(name)-\(index)".utf8)
                return DemoWorkload.Record(key: key, value: key + [UInt8](repeating: UInt8(ascii: "x"), count: recordBytes - key.count))
            }
        }
        try environment.produceRequests(run("first"))
        try environment.produceRequests(run("second"))

        let kept = try KafkaTopicReader.readToEnd(bootstrapServers: environment.kafka.bootstrapServers,
                                                  topic: environment.requestTopic, timeoutMilliseconds: 60_000)
        let keys = kept.compactMap { $0.key.map { String(decoding: $0, as: UTF8.self) } }
        let second = Set(keys.filter { $0.hasPrefix("second-") })
        #expect(second.count == perRun)  // the latest run, whole
        #expect(keys.filter { $0.hasPrefix("first-") }.count < perRun)  // the limit was passed: the first run lost records
    }

    /// The last line of the output, parsed as a JSON object.
    static func finalJSON(_ output: String) throws -> [String: Any] {
        let line = try #require(output.split(separator: "\n").last)
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }
}
