import Bridge
import Foundation
import JSON
import Kafka
import Observability

/// Runs `apns-bridge bench`: the h2load reference against the simulator, then the bridge end to
/// end (mock Kafka → bridge → simulator → mock Kafka) on the same simulator, timing each phase.
public enum BenchmarkRunner {
    /// The benchmark cannot run as asked.
    public struct SetupError: Error, CustomStringConvertible {
        /// What is wrong.
        public var description: String
    }

    /// The group id of the bridge under test.
    public static let groupID = "apns-bridge-bench"

    /// Partitions every topic needs so that neither the request topic nor the results topic of
    /// the mock cluster loses records (see `MockPartitionBudget`).
    public static func partitionsNeeded(for workload: BenchmarkWorkload) -> Int {
        max(MockPartitionBudget.partitionsNeeded(records: workload.records.count, bytesPerRecord: workload.largestRequestBytes),
            MockPartitionBudget.partitionsNeeded(records: workload.expectedResults, bytesPerRecord: workload.estimatedResultBytes))
    }

    /// Runs every phase and reports the figures. `progress` gets a line per phase and about one
    /// a second while results arrive.
    /// - Throws: `SetupError` when `settings.partitions` is below `partitionsNeeded(for:)`;
    ///   errors of the environment, Kafka or the pipeline's setup.
    public static func run(settings: BenchmarkSettings, workload: BenchmarkWorkload,
                           progress: @escaping @Sendable (String) -> Void = { _ in }) throws -> BenchmarkReport {
        let needed = partitionsNeeded(for: workload)
        guard settings.partitions >= needed else {
            throw SetupError(description: "\(workload.expectedResults) results need at least \(needed) partitions: librdkafka's mock cluster keeps at most 5 MB or 100,000 records per partition")
        }
        let started = Timestamp.monotonicNanoseconds()
        var report = BenchmarkReport(settings: settings)
        progress("starting the mock Kafka cluster (\(settings.partitions) partitions) and the APNs simulator (\(settings.simulatorThreads) thread(s))")
        let environment = try LocalEnvironment(partitions: Int32(settings.partitions), simulatorThreads: settings.simulatorThreads)
        defer { environment.close() }

        if settings.runH2Load {
            let count = min(settings.notifications, settings.h2loadNotificationCap)
            progress("h2load: \(count) requests over \(settings.connections) connection(s), 100 streams each")
            do {
                report.h2load = try H2LoadReference.run(environment: environment, notifications: count,
                                                        connections: settings.connections)
            } catch {
                report.warnings.append("h2load reference not measured: \(error)")
            }
            if let h2load = report.h2load, !h2load.isNearlyAll2xx {
                report.warnings.append("h2load: only \(h2load.status2xx) of \(h2load.total) answers were 2xx")
            }
        }

        progress("producing \(workload.records.count) requests (\(workload.expectedResults) notifications)")
        var phase = Timestamp.monotonicNanoseconds()
        try environment.produceRequests(workload.records)
        report.produceSeconds = seconds(since: phase)

        let observer = try KafkaConsumer(
            bootstrapServers: environment.kafka.bootstrapServers,
            groupID: "bench-observer-\(UInt32.random(in: 0...UInt32.max))", topics: [environment.resultsTopic],
            properties: ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "fetch.max.bytes": "10485760"],
            logger: Logger(label: "bench.observer")
        )
        defer { observer.close() }
        // The observer joins its group while the bridge joins its own; it reads from the start.

        progress("starting the bridge (\(settings.connections) connection(s), max_in_flight \(settings.maxInFlight), \(settings.exactlyOnce ? "exactly once" : "at least once"))")
        let configuration = try environment.configuration(
            groupID: groupID, connections: settings.connections, exactlyOnce: settings.exactlyOnce,
            extra: "limits: {max_in_flight: \(settings.maxInFlight), max_tokens_per_request: \(max(settings.tokensPerRequest, 100))}"
        )
        let cpuBefore = ProcessCPUTimes.sample()
        phase = Timestamp.monotonicNanoseconds()
        let bridgeStartedAt = Timestamp.nowMilliseconds()
        let bridge = try BackgroundPipeline(configuration: configuration)
        let collected = collect(observer: observer, expected: workload.expectedResults, bridge: bridge,
                                idleTimeoutSeconds: settings.idleTimeoutSeconds, progress: progress)
        let cpuAfter = ProcessCPUTimes.sample()
        report.startupSeconds = collected.lastTimestamp >= collected.firstTimestamp
            ? Double(collected.firstTimestamp - bridgeStartedAt) / 1000 : seconds(since: phase)
        report.windowSeconds = collected.windowSeconds
        report.observedWindowSeconds = collected.observedWindowSeconds
        report.processCPUSeconds = cpuAfter.processSeconds - cpuBefore.processSeconds
        report.threadCPU = cpuAfter.threadGroups(since: cpuBefore)
        report.maxResidentMegabytes = cpuAfter.maxResidentMegabytes

        progress("stopping the bridge")
        phase = Timestamp.monotonicNanoseconds()
        report.pipelineExitCode = bridge.stop()
        report.fetchPauses = bridge.pipeline.fetchPauseCount
        report.stopSeconds = seconds(since: phase)
        report.committedRecords = try environment.committedRequestCount(groupID: groupID)
        report.producedRecords = workload.records.count
        check(collected.values, workload: workload, into: &report)
        report.totalSeconds = seconds(since: started)
        return report
    }

    /// What the observer saw: the result values and when they were produced.
    private struct Collected {
        var values: [[UInt8]] = []
        var firstTimestamp = Int64.max
        var lastTimestamp = Int64.min
        var firstSeenNanoseconds: UInt64?
        var lastSeenNanoseconds: UInt64 = 0

        /// First to last result by the records' Kafka timestamps (set by the bridge's producer).
        var windowSeconds: Double {
            lastTimestamp >= firstTimestamp ? Double(lastTimestamp - firstTimestamp) / 1000 : 0
        }

        /// First to last result as the observer received them.
        var observedWindowSeconds: Double {
            firstSeenNanoseconds.map { Double(lastSeenNanoseconds &- $0) / 1e9 } ?? 0
        }
    }

    /// Polls the results topic until `expected` results arrived, the bridge stopped, or nothing
    /// arrived for `idleTimeoutSeconds`. Values are only stored here and parsed after the run,
    /// so the observer takes as little CPU from the bridge as possible.
    private static func collect(observer: KafkaConsumer, expected: Int, bridge: BackgroundPipeline,
                                idleTimeoutSeconds: Double, progress: @Sendable (String) -> Void) -> Collected {
        var collected = Collected()
        collected.values.reserveCapacity(expected)
        var lastArrival = Timestamp.monotonicNanoseconds()
        var lastProgress = lastArrival
        while collected.values.count < expected, bridge.exitCode == nil {
            let now = Timestamp.monotonicNanoseconds()
            guard Double(now - lastArrival) / 1e9 < idleTimeoutSeconds else {
                progress("no result for \(Int(idleTimeoutSeconds)) s: giving up")
                break
            }
            let messages: [KafkaMessage]
            do {
                messages = try observer.poll(maxMessages: 10_000, timeoutMilliseconds: 100)
            } catch {
                progress("observer: \(error)")
                break
            }
            if !messages.isEmpty {
                let arrival = Timestamp.monotonicNanoseconds()
                lastArrival = arrival
                if collected.firstSeenNanoseconds == nil { collected.firstSeenNanoseconds = arrival }
                collected.lastSeenNanoseconds = arrival
            }
            for message in messages {
                collected.values.append(message.value ?? [])
                if let timestamp = message.timestampMilliseconds {
                    collected.firstTimestamp = min(collected.firstTimestamp, timestamp)
                    collected.lastTimestamp = max(collected.lastTimestamp, timestamp)
                }
            }
            if now - lastProgress >= 1_000_000_000 {
                lastProgress = now
                progress("  results \(collected.values.count)/\(expected)")
            }
        }
        return collected
    }

    /// Parses every result (JSONScanner): each expected (request, token) exactly once, delivered;
    /// collects `latency_ms`.
    private static func check(_ values: [[UInt8]], workload: BenchmarkWorkload, into report: inout BenchmarkReport) {
        var missing = workload.expectedKeys
        var latencies: [Double] = []
        latencies.reserveCapacity(values.count)
        report.results = values.count
        for value in values {
            guard let document = try? JSONScanner.parse(value),
                  let requestID = document.root["request_id"]?.stringValue,
                  let token = document.root["token"]?.stringValue,
                  let outcome = document.root["outcome"]?.stringValue,
                  let latency = document.root["latency_ms"]?.numberText.flatMap(Double.init) else {
                report.mismatches.append("an unreadable result")
                continue
            }
            latencies.append(latency)
            let key = DemoWorkload.outcomeKey(requestID: requestID, token: token)
            if outcome == PushOutcome.delivered.rawValue {
                report.delivered += 1
            } else {
                report.mismatches.append("\(requestID): outcome \(outcome)")
            }
            if missing.remove(key) == nil {
                report.mismatches.append("\(requestID): a duplicate or unexpected result")
            }
        }
        if !missing.isEmpty {
            report.mismatches.append("\(missing.count) expected result(s) missing")
        }
        latencies.sort()
        report.latencyP50 = percentile(latencies, 0.50)
        report.latencyP99 = percentile(latencies, 0.99)
    }

    /// Nearest-rank percentile of sorted values.
    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    private static func seconds(since start: UInt64) -> Double {
        Double(Timestamp.monotonicNanoseconds() - start) / 1e9
    }
}
