import Bridge
import Foundation
import JSON
import Kafka
import Observability

/// Runs `apns-bridge bench`: rounds of the h2load reference against the simulator and the bridge
/// end to end (mock Kafka → bridge → simulator → mock Kafka) on the same simulator right after,
/// then a paced run, timing each phase.
public enum BenchmarkRunner {
    /// The benchmark cannot run as asked.
    public struct SetupError: Error, CustomStringConvertible {
        /// What is wrong.
        public var description: String
    }

    /// The group id of the bridge under test.
    public static let groupID = "apns-bridge-bench"

    /// Partitions every topic needs so that the mock cluster loses none of the records the bench
    /// still reads (see `MockPartitionBudget`): one run's requests and results, and the warm-up's.
    /// Runs are planned one at a time, not summed: every run's results are read and checked
    /// before the next run produces anything (the paced run's requests and results are read
    /// after it), so once the paced run's records push a partition past the mock's limit, the
    /// records it drops are the earlier runs', already read. Every partition costs the bridge a
    /// produce request of its own per `linger.ms` and an entry of its own in every fetch:
    /// planning for both runs at once gave 100,000 single-token requests 31 partitions instead
    /// of 16, which showed in the paced run's CPU and tail (docs/BENCHMARKS.md).
    public static func partitionsNeeded(for workload: BenchmarkWorkload, instances: Int = 1) -> Int {
        let extra = warmUpRequestsPerRound * instances * maximumWarmUpRounds
        return max(
            MockPartitionBudget.partitionsNeeded(records: workload.records.count + extra, bytesPerRecord: workload.largestRequestBytes),
            MockPartitionBudget.partitionsNeeded(records: workload.expectedResults + extra, bytesPerRecord: workload.estimatedResultBytes))
    }

    /// Single-token requests per instance in one warm-up round.
    static let warmUpRequestsPerRound = 100
    /// Warm-up rounds before giving up on every instance taking part.
    static let maximumWarmUpRounds = 20

    /// Runs every phase and reports the figures. `progress` gets a line per phase and about one
    /// a second while results arrive.
    /// - Throws: `SetupError` when `settings.partitions` is below `partitionsNeeded(for:)`;
    ///   errors of the environment, Kafka or the bridge processes' start.
    public static func run(settings: BenchmarkSettings, workload: BenchmarkWorkload,
                           progress: @escaping @Sendable (String) -> Void = { _ in }) throws -> BenchmarkReport {
        let needed = partitionsNeeded(for: workload, instances: settings.instances)
        guard settings.partitions >= needed else {
            throw SetupError(description: "this run needs at least \(needed) partitions: librdkafka's mock cluster keeps at most 5 MB or 100,000 records per partition")
        }
        let started = Timestamp.monotonicNanoseconds()
        var report = BenchmarkReport(settings: settings)
        progress("starting the mock Kafka cluster (\(settings.partitions) partitions) and the APNs simulator (\(settings.simulatorThreads) thread(s))")
        let environment = try LocalEnvironment(
            partitions: Int32(settings.partitions), maxConcurrentStreams: settings.simulatorStreams,
            simulatorThreads: settings.simulatorThreads, simulatorLatency: .milliseconds(settings.simulatorLatencyMilliseconds))
        defer { environment.close() }
        // Kafka's brokers accept with Nagle's algorithm off; the mock's leave it on, which held
        // single fetches back for a delayed ACK (44 ms). Set before any client connects.
        environment.kafka.disableNagle()

        let observer = try KafkaConsumer(
            bootstrapServers: environment.kafka.bootstrapServers,
            groupID: "bench-observer-\(UInt32.random(in: 0...UInt32.max))", topics: [environment.resultsTopic],
            properties: ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "fetch.max.bytes": "10485760",
                         "fetch.wait.max.ms": "10"],
            logger: Logger(label: "bench.observer")
        )
        defer { observer.close() }

        progress("starting \(settings.instances) bridge process(es) (`apns-bridge run`: \(settings.connections) connection(s), max_in_flight \(settings.maxInFlight), \(settings.exactlyOnce ? "exactly once" : "at least once"))")
        let yaml = environment.configurationYAML(
            groupID: groupID, connections: settings.connections, exactlyOnce: settings.exactlyOnce,
            extra: "limits: {max_in_flight: \(settings.maxInFlight), max_tokens_per_request: \(max(settings.tokensPerRequest, 100))}\nlog: {level: \(settings.bridgeLogLevel), format: text}",
            consumer: settings.bridgeConsumerProperties, lingerMilliseconds: nil  // the producer as users run it
        )
        let bridges = try (1...settings.instances).map {
            try BridgeProcess(executable: settings.executable, yaml: yaml, instanceID: "bench-instance-\($0)",
                              wrapper: settings.wrapper)
        }
        var produced = 0
        defer { for bridge in bridges where bridge.child.isRunning { _ = bridge.stop(timeoutSeconds: 10) } }

        // The paced run's producer takes part in the warm-up, so that it is connected and has its
        // producer id before its first timed record.
        let pacedProducer = settings.runPaced ? try PacedProducer(environment: environment) : nil
        defer { pacedProducer?.close() }
        produced += try warmUp(environment: environment, producer: pacedProducer, observer: observer, bridges: bridges,
                               settings: settings, report: &report, progress: progress)

        // The peak rounds, each h2load's reference and then the bridge's peak run.
        var h2loadFailed = !settings.runH2Load
        for number in 1...settings.rounds {
            let roundWorkload = number == 1 ? workload
                : BenchmarkWorkload(requests: workload.records.count, tokensPerRequest: workload.tokensPerRequest,
                                    seed: 7 + UInt64(number), idPrefix: "bench\(number)")
            let round = try peakRound(number: number, workload: roundWorkload, h2load: !h2loadFailed,
                                      environment: environment, observer: observer, bridges: bridges,
                                      settings: settings, report: &report, progress: progress)
            produced += roundWorkload.records.count
            if round.h2load == nil { h2loadFailed = true }  // the later rounds skip it too
            report.rounds.append(round)
            // An instance that ended leaves the run incomplete: no need to wait through more rounds.
            guard bridges.allSatisfy({ $0.child.isRunning }) else { break }
        }

        let pacedRate = Self.pacedRate(given: settings.pacedRate, peakRequestsPerSecond: report.requestsPerSecond,
                                       instancesRunning: bridges.allSatisfy { $0.child.isRunning })
        if pacedProducer != nil && pacedRate == nil {
            report.warnings.append("paced run skipped: the peak rounds gave no rate to pace at half of")
        }
        if let pacedProducer, let rate = pacedRate {
            let paced = BenchmarkWorkload(requests: workload.records.count, tokensPerRequest: workload.tokensPerRequest,
                                          seed: 8, idPrefix: "paced")
            report.pacedRequestsPerSecond = rate
            progress("paced run: \(paced.records.count) requests at \(Int(rate)) requests/s")
            // The observer reads the results after the requests are produced, not meanwhile:
            // librdkafka 2.0.2's mock broker serves every client on one thread and walks a
            // partition's list of message sets for each fetch, so an observer fetching the
            // growing results topic would delay the bridge's own fetches (its timestamps are
            // the bridge producer's, whenever the observer reads them).
            let observed = try observer.assignment()
            try observer.pause(observed)
            pacedProducer.start(records: paced.records, recordsPerSecond: rate)
            // Producing takes records / rate; Kafka acknowledging them, a little more.
            let producingDeadline = Timestamp.monotonicNanoseconds()
                + UInt64(min(2 * Double(paced.records.count) / rate + 60, 86_400) * 1e9)
            while !pacedProducer.isDone && Timestamp.monotonicNanoseconds() < producingDeadline { usleep(10_000) }
            if !pacedProducer.isDone { report.warnings.append("paced run: the requests were not all produced in time") }
            try observer.resume(observed)
            let collected = collect(observer: observer, prefix: paced.idPrefix, expected: paced.expectedResults,
                                    bridges: bridges, idleTimeoutSeconds: settings.idleTimeoutSeconds, progress: progress)
            produced += paced.records.count
            if pacedProducer.failureCount > 0 { report.warnings.append("paced run: \(pacedProducer.failureCount) request(s) not acknowledged") }
            try measureAddedLatency(collected, workload: paced, environment: environment, into: &report)
        }

        // Wait until the running instances committed everything (librdkafka commits every 200 ms
        // here): when instances stop together, the first to leave starts a rebalance and the
        // mock cluster refuses the others' final commits while it lasts.
        let commitDeadline = Timestamp.monotonicNanoseconds() + 30_000_000_000
        while (try? environment.committedRequestCount(groupID: groupID)) ?? 0 < Int64(produced),
              Timestamp.monotonicNanoseconds() < commitDeadline {
            usleep(100_000)
        }
        progress("stopping the bridge process(es)")
        let phase = Timestamp.monotonicNanoseconds()
        report.instances = stop(bridges)
        report.stopSeconds = seconds(since: phase)
        for (index, instance) in report.instances.enumerated() where instance.exitCode != 0 {
            report.warnings.append("instance \(index + 1) exited \(instance.exitCode): \(bridges[index].logTail)")
        }
        report.committedRecords = try environment.committedRequestCount(groupID: groupID)
        report.producedRecords = produced
        report.totalSeconds = seconds(since: started)
        return report
    }

    /// Stops the instances one after the other (SIGTERM: drain, flush, final commit) and reports
    /// how each ended. Its peak RSS is the kernel's `VmHWM` for the instance, read right before
    /// its signal (what the drain after it takes is not counted). Not `wait4`'s `ru_maxrss`:
    /// `posix_spawn` runs the child in the parent's memory until it execs, and Linux carries the
    /// high-water mark of the memory an exec leaves into the child's `ru_maxrss`, so that figure
    /// was at least the benchmark process's own peak (hundreds of MB for every run after the
    /// first of `bench --targets`, whose instances peak far lower).
    public static func stop(_ bridges: [BridgeProcess]) -> [BenchmarkReport.Instance] {
        bridges.map { bridge in
            let highWater = bridge.sample().maxResidentMegabytes
            let exit = bridge.stop()
            return BenchmarkReport.Instance(exitCode: exit.status, maxResidentMegabytes: highWater,
                                            lifetimeCPUSeconds: exit.cpuSeconds)
        }
    }

    /// Produces warm-up rounds until their results are in and, with several instances, every
    /// instance finished some of them: the group is joined and every connection is up before
    /// anything is measured.
    /// - Returns: the requests produced.
    /// - Parameter producer: produces the rounds when given (the paced run's, to warm it up).
    private static func warmUp(environment: LocalEnvironment, producer: PacedProducer?, observer: KafkaConsumer, bridges: [BridgeProcess],
                               settings: BenchmarkSettings, report: inout BenchmarkReport,
                               progress: @escaping @Sendable (String) -> Void) throws -> Int {
        let phase = Timestamp.monotonicNanoseconds()
        var produced = 0
        for round in 0..<maximumWarmUpRounds {
            let warmUp = BenchmarkWorkload(requests: warmUpRequestsPerRound * bridges.count, tokensPerRequest: 1,
                                           seed: 100 + UInt64(round), idPrefix: "warmup\(round)")
            if let producer {
                try producer.produceAndWait(warmUp.records)
            } else {
                try environment.produceRequests(warmUp.records)
            }
            produced += warmUp.records.count
            _ = collect(observer: observer, prefix: warmUp.idPrefix, expected: warmUp.expectedResults, bridges: bridges,
                        idleTimeoutSeconds: settings.idleTimeoutSeconds, progress: { _ in })
            let finished = bridges.map { $0.finishedNotifications() ?? 0 }
            if finished.allSatisfy({ $0 > 0 }) { break }
            progress("warm-up round \(round + 1): notifications finished per instance \(finished); waiting for every instance to take part")
        }
        report.startupSeconds = seconds(since: phase)
        progress("warm-up done in \(BenchmarkReport.format(report.startupSeconds, 2)) s (group joined, connections up)")
        return produced
    }

    /// Waits until the instances together finished `expected` notifications more than `base`
    /// (their `apns_bridge_notifications_total`, read ten times a second), one of them ended, or
    /// the count did not grow for `idleTimeoutSeconds`.
    static func waitUntilFinished(_ bridges: [BridgeProcess], expected: Int, after base: Int,
                                          idleTimeoutSeconds: Double, progress: @Sendable (String) -> Void) {
        var last = -1
        var lastGrowth = Timestamp.monotonicNanoseconds()
        var lastProgress = lastGrowth
        while bridges.allSatisfy({ $0.child.isRunning }) {
            let finished = bridges.reduce(0) { $0 + ($1.finishedNotifications() ?? 0) } - base
            if finished >= expected { return }
            let now = Timestamp.monotonicNanoseconds()
            if finished > last {
                last = finished
                lastGrowth = now
            } else if Double(now - lastGrowth) / 1e9 >= idleTimeoutSeconds {
                progress("no notification finished for \(Int(idleTimeoutSeconds)) s: reading what there is")
                return
            }
            if now - lastProgress >= 1_000_000_000 {
                lastProgress = now
                progress("  finished \(finished)/\(expected)")
            }
            usleep(100_000)
        }
    }

    private static func seconds(since start: UInt64) -> Double {
        Double(Timestamp.monotonicNanoseconds() - start) / 1e9
    }
}

extension BenchmarkRunner {
    /// The paced run's rate: `given` (`--rate`) when set, else half of the median round's
    /// requests/s; nil when there is no peak rate to take half of (no round finished, or an
    /// instance ended), so that the run is skipped rather than paced at a rate of nothing.
    public static func pacedRate(given: Double?, peakRequestsPerSecond: Double, instancesRunning: Bool) -> Double? {
        if let given { return given }
        guard instancesRunning, peakRequestsPerSecond >= 2 else { return nil }
        return peakRequestsPerSecond / 2
    }
}
