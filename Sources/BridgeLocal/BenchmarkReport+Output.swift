import Bridge

extension BenchmarkReport {
    /// A readable summary, one line per figure.
    public var summary: [String] {
        var lines: [String] = []
        let peak = peak
        lines.append("workload: \(settings.requests) requests × \(settings.tokensPerRequest) token(s) = \(settings.notifications) notifications per run; \(settings.partitions) partitions, \(settings.instances) instance(s), \(settings.connections) connection(s) each, max_in_flight \(settings.maxInFlight), simulator threads \(settings.simulatorThreads), \(settings.simulatorStreams) streams per connection, latency \(settings.simulatorLatencyMilliseconds) ms, \(settings.exactlyOnce ? "exactly once" : "at least once")")
        lines.append("warm-up: \(Self.format(startupSeconds, 2)) s (instances started, group joined, connections up; not measured)")
        for (index, round) in rounds.enumerated() {
            var line = "round \(index + 1): bridge \(Self.format(round.notificationsPerSecond, 0)) notifications/s, CPU \(Self.format(round.bridgeCPUMicrosecondsPerNotification, 1)) µs each"
            if let h2load = round.h2load, let share = round.shareOfH2Load {
                line += "; h2load \(Self.format(h2load.requestsPerSecond, 0)) req/s, CPU \(h2load.cpuMicrosecondsPerRequest.map { Self.format($0, 1) } ?? "-") µs each; share \(Self.format(share * 100, 1)) %"
                    + (round.cpuRatioToH2Load.map { ", CPU \(Self.format($0, 2)) ×" } ?? "")
            }
            lines.append(line + (index == medianRoundIndex ? "  ← the median round, whose figures follow" : ""))
        }
        if let h2load = peak.h2load {
            lines.append("h2load reference (the median round's run): \(h2load.total) requests in \(Self.format(h2load.seconds, 2)) s = \(Self.format(h2load.requestsPerSecond, 0)) req/s, CPU \(h2load.cpuMicrosecondsPerRequest.map { Self.format($0, 1) } ?? "-") µs per request (2xx \(h2load.status2xx), 4xx \(h2load.status4xx), 5xx \(h2load.status5xx), failed \(h2load.failed), errored \(h2load.errored))")
        }
        lines.append("peak run: produced in \(Self.format(peak.produceSeconds, 2)) s; window \(Self.format(peak.windowSeconds, 2)) s first → last result (read afterwards in \(Self.format(peak.observedWindowSeconds, 2)) s)")
        lines.append("throughput: \(Self.format(peak.notificationsPerSecond, 0)) notifications/s, \(Self.format(requestsPerSecond, 0)) requests/s"
            + (peak.shareOfH2Load.map { " (\(Self.format($0 * 100, 1)) % of h2load)" } ?? ""))
        lines.append("bridge CPU: \(Self.format(peak.bridgeCPUSeconds, 2)) s = \(Self.format(peak.bridgeCPUMicrosecondsPerNotification, 1)) µs per notification (the `apns-bridge run` process(es) only)"
            + (peak.cpuRatioToH2Load.map { "; \(Self.format($0, 2)) × h2load's CPU per request" } ?? ""))
        for (index, run) in peak.instances.enumerated() {
            let threads = run.threadCPU.prefix(6).map { "\($0.name) \(Self.format($0.seconds, 2))" }.joined(separator: ", ")
            let ending = index < instances.count ? ", peak RSS \(Self.format(instances[index].maxResidentMegabytes, 0)) MB, exit \(instances[index].exitCode)" : ""
            lines.append("  instance \(index + 1): \(run.notifications) notifications = \(Self.format(peak.notificationsPerSecond(of: run), 0))/s, CPU \(Self.format(run.cpuSeconds, 2)) s (\(threads))" + ending)
        }
        lines.append("benchmark process CPU (simulator, mock Kafka, producer, observer): \(Self.format(peak.benchmarkProcessCPUSeconds, 2)) s")
        lines.append("latency_ms (peak run): p50 \(peak.latencyP50.map { Self.format($0, 1) } ?? "-"), p99 \(peak.latencyP99.map { Self.format($0, 1) } ?? "-") (the backlog's wait counts)")
        if let pacedRequestsPerSecond {
            lines.append("paced run at \(Self.format(pacedRequestsPerSecond, 0)) requests/s: \(pacedResults) results in \(Self.format(pacedWindowSeconds, 2)) s; time the bridge adds (result − request Kafka timestamp): p50 \(addedLatencyP50.map { Self.format($0, 0) } ?? "-") ms, p99 \(addedLatencyP99.map { Self.format($0, 0) } ?? "-") ms, max \(addedLatencyMax.map { Self.format($0, 0) } ?? "-") ms; of which up to the APNs answer (latency_ms): p50 \(answerLatencyP50.map { Self.format($0, 1) } ?? "-") ms, p99 \(answerLatencyP99.map { Self.format($0, 1) } ?? "-") ms")
        }
        lines.append("stop: \(Self.format(stopSeconds, 2)) s; results (every round): \(rounds.reduce(0) { $0 + $1.results }) seen, \(rounds.reduce(0) { $0 + $1.delivered }) delivered; committed offsets \(committedRecords) of \(producedRecords) requests")
        for mismatch in mismatches.prefix(10) {
            lines.append("MISMATCH \(mismatch)")
        }
        for warning in warnings {
            lines.append("WARNING \(warning)")
        }
        lines.append("total wall time: \(Self.format(totalSeconds, 2)) s")
        lines.append(isComplete ? "complete: every notification delivered once, every offset committed, clean stops"
                                : "INCOMPLETE: see the lines above")
        return lines
    }

    /// The key figures as one line of JSON; the field names are stable (docs/BENCHMARKS.md).
    public var jsonLine: String {
        func number(_ value: Double?, _ decimals: Int) -> String { value.map { Self.format($0, decimals) } ?? "null" }
        func list(_ values: [String]) -> String { "[" + values.joined(separator: ",") + "]" }
        let peak = peak
        let fields: [(String, String)] = [
            ("complete", "\(isComplete)"),
            ("requests", "\(settings.requests)"),
            ("tokens_per_request", "\(settings.tokensPerRequest)"),
            ("notifications", "\(settings.notifications)"),
            ("results", "\(peak.results)"),
            ("delivered", "\(peak.delivered)"),
            ("partitions", "\(settings.partitions)"),
            ("instances", "\(settings.instances)"),
            ("connections", "\(settings.connections)"),
            ("max_in_flight", "\(settings.maxInFlight)"),
            ("simulator_threads", "\(settings.simulatorThreads)"),
            ("simulator_streams", "\(settings.simulatorStreams)"),
            ("simulator_latency_ms", "\(settings.simulatorLatencyMilliseconds)"),
            ("exactly_once", "\(settings.exactlyOnce)"),
            ("notifications_per_second", Self.format(peak.notificationsPerSecond, 1)),
            ("requests_per_second", Self.format(requestsPerSecond, 1)),
            ("instance_notifications", list(peak.instances.map { "\($0.notifications)" })),
            ("instance_notifications_per_second", list(peak.instances.map { Self.format(peak.notificationsPerSecond(of: $0), 1) })),
            ("window_seconds", Self.format(peak.windowSeconds, 3)),
            ("warmup_seconds", Self.format(startupSeconds, 3)),
            ("produce_seconds", Self.format(peak.produceSeconds, 3)),
            ("first_result_ms_after_produced", peak.firstResultAfterProducedMilliseconds.map { "\($0)" } ?? "null"),
            ("stop_seconds", Self.format(stopSeconds, 3)),
            ("total_seconds", Self.format(totalSeconds, 3)),
            ("latency_ms_p50", number(peak.latencyP50, 1)),
            ("latency_ms_p99", number(peak.latencyP99, 1)),
            ("bridge_cpu_seconds", Self.format(peak.bridgeCPUSeconds, 3)),
            ("bridge_cpu_us_per_notification", Self.format(peak.bridgeCPUMicrosecondsPerNotification, 2)),
            ("instance_cpu_seconds", list(peak.instances.map { Self.format($0.cpuSeconds, 3) })),
            ("h2load_cpu_us_per_request", number(peak.h2load?.cpuMicrosecondsPerRequest, 2)),
            ("bridge_cpu_to_h2load_cpu", number(peak.cpuRatioToH2Load, 3)),
            ("benchmark_process_cpu_seconds", Self.format(peak.benchmarkProcessCPUSeconds, 3)),
            ("max_rss_mb", Self.format(maxResidentMegabytes, 1)),
            ("paced_requests_per_second", number(pacedRequestsPerSecond, 1)),
            ("paced_results", "\(pacedResults)"),
            ("added_ms_p50", number(addedLatencyP50, 0)),
            ("added_ms_p99", number(addedLatencyP99, 0)),
            ("added_ms_max", number(addedLatencyMax, 0)),
            ("answer_ms_p50", number(answerLatencyP50, 1)),
            ("answer_ms_p99", number(answerLatencyP99, 1)),
            ("produced_records", "\(producedRecords)"),
            ("committed_offsets", "\(committedRecords)"),
            ("bridge_exit_codes", list(instances.map { "\($0.exitCode)" })),
            ("h2load_requests", peak.h2load.map { "\($0.total)" } ?? "null"),
            ("h2load_requests_per_second", number(peak.h2load?.requestsPerSecond, 1)),
            ("rounds", "\(rounds.count)"),
            ("median_round", medianRoundIndex.map { "\($0 + 1)" } ?? "null"),
            ("rounds_notifications_per_second", list(rounds.map { Self.format($0.notificationsPerSecond, 1) })),
            ("rounds_bridge_cpu_us_per_notification", list(rounds.map { Self.format($0.bridgeCPUMicrosecondsPerNotification, 2) })),
            ("rounds_h2load_requests_per_second", list(rounds.map { number($0.h2load?.requestsPerSecond, 1) })),
            ("rounds_h2load_cpu_us_per_request", list(rounds.map { number($0.h2load?.cpuMicrosecondsPerRequest, 2) })),
            ("rounds_share_of_h2load", list(rounds.map { number($0.shareOfH2Load, 4) })),
            ("rounds_bridge_cpu_to_h2load_cpu", list(rounds.map { number($0.cpuRatioToH2Load, 3) })),
            ("h2load_2xx", peak.h2load.map { "\($0.status2xx)" } ?? "null"),
            ("share_of_h2load", number(peak.shareOfH2Load, 4)),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}
