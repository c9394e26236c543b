import Foundation
import Kafka
import Observability

/// One peak round of `apns-bridge bench`: h2load's reference, then the bridge's peak run.
extension BenchmarkRunner {
    /// Runs peak round `number`: while the instances are stopped (SIGSTOP), h2load sends the
    /// benchmark's notification straight to the simulator (when `h2load` is set) and the round's
    /// requests are produced; then the instances continue and drain them as a backlog, and the
    /// observer reads their results. h2load and the bridge thus meet the machine in the same
    /// minute, and neither takes CPU from the other.
    /// - Returns: the round's figures; what its results lack goes to `report.mismatches`.
    static func peakRound(number: Int, workload: BenchmarkWorkload, h2load: Bool, environment: LocalEnvironment,
                          observer: KafkaConsumer, bridges: [BridgeProcess], settings: BenchmarkSettings,
                          report: inout BenchmarkReport, progress: @Sendable (String) -> Void) throws -> BenchmarkReport.PeakRound {
        var round = BenchmarkReport.PeakRound()
        // Read before the instances stop: their counts come from their own `/metrics`.
        let before = bridges.map { (cpu: $0.sample(), finished: $0.finishedNotifications() ?? 0) }
        // The observer reads the results once the bridge has finished them, as in the paced run:
        // its fetches, and the mock broker serving them, would otherwise take CPU from the
        // bridge on this machine. The window comes from the results' Kafka timestamps either way.
        let observed = try observer.assignment()
        try observer.pause(observed)
        let selfBefore: ProcessCPUTimes  // after h2load: the simulator served it in this process
        var continuedAtMilliseconds = Int64.max
        for bridge in bridges { bridge.child.send(SIGSTOP) }
        do {
            defer {
                continuedAtMilliseconds = Timestamp.nowMilliseconds()
                for bridge in bridges { bridge.child.send(SIGCONT) }
            }
            if h2load {
                round.h2load = runH2Load(round: number, environment: environment, settings: settings, report: &report,
                                         progress: progress)
            }
            // The requests are produced while the instances are stopped: the bench's producer,
            // and the mock broker taking its produce requests, stand for producers and brokers
            // on other machines and would otherwise share this machine's cores with the bridge.
            progress("round \(number) of \(settings.rounds), peak run: producing \(workload.records.count) requests (\(workload.expectedResults) notifications)")
            selfBefore = ProcessCPUTimes.sample()
            let phase = Timestamp.monotonicNanoseconds()
            try environment.produceRequests(workload.records)
            round.produceSeconds = Double(Timestamp.monotonicNanoseconds() - phase) / 1e9
        }
        waitUntilFinished(bridges, expected: workload.expectedResults, after: before.reduce(0) { $0 + $1.finished },
                          idleTimeoutSeconds: settings.idleTimeoutSeconds, progress: progress)
        try observer.resume(observed)
        let peak = collect(observer: observer, prefix: workload.idPrefix, expected: workload.expectedResults,
                           bridges: bridges, idleTimeoutSeconds: settings.idleTimeoutSeconds, progress: progress)
        let after = bridges.map { (cpu: $0.sample(), finished: $0.finishedNotifications() ?? 0) }
        round.benchmarkProcessCPUSeconds = ProcessCPUTimes.sample().processSeconds - selfBefore.processSeconds
        round.windowSeconds = peak.windowSeconds
        round.firstResultAfterProducedMilliseconds = peak.firstTimestamp == .max ? nil : peak.firstTimestamp - continuedAtMilliseconds
        round.observedWindowSeconds = peak.observedWindowSeconds
        round.instances = zip(before, after).map { before, after in
            BenchmarkReport.InstanceRun(notifications: after.finished - before.finished,
                                        // Zero, not negative, for an instance gone (its /proc reads 0); the
                                        // run is then incomplete anyway.
                                        cpuSeconds: max(0, after.cpu.processSeconds - before.cpu.processSeconds),
                                        threadCPU: after.cpu.threadGroups(since: before.cpu))
        }
        check(peak.messages, workload: workload, into: &round, mismatches: &report.mismatches, label: "round \(number)")
        return round
    }

    /// One h2load run of the reference (see `H2LoadReference`), or nil with a warning when it
    /// could not run or fewer than 99.9 % of its answers were 2xx: h2load counts any answer as a
    /// finished request, so a run of quick refusals (a provider token the simulator rejects) is
    /// no ceiling for delivered notifications, and its rate and CPU are not compared with.
    private static func runH2Load(round: Int, environment: LocalEnvironment, settings: BenchmarkSettings,
                                  report: inout BenchmarkReport, progress: @Sendable (String) -> Void) -> H2LoadResult? {
        let count = min(settings.notifications, settings.h2loadNotificationCap)
        progress("round \(round) of \(settings.rounds), h2load: \(count) requests over \(settings.connections) connection(s), 100 streams each (the bridge stopped)")
        do {
            let result = try H2LoadReference.run(environment: environment, notifications: count, connections: settings.connections)
            guard result.isNearlyAll2xx else {
                report.warnings.append(
                    "h2load reference not used in round \(round): only \(result.status2xx) of \(result.total) answers were 2xx")
                return nil
            }
            return result
        } catch {
            report.warnings.append("h2load reference not measured in round \(round): \(error)")
            return nil
        }
    }
}
