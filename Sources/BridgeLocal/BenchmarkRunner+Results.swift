import Bridge
import JSON
import Kafka
import Observability

/// What the benchmark reads back: the results of each phase, their check, the added latency.
extension BenchmarkRunner {
    /// What the observer saw of one phase: its result records and when they were produced.
    struct Collected {
        var messages: [KafkaMessage] = []
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

    /// Polls the results topic until `expected` results whose key starts with `prefix` arrived,
    /// a bridge process ended, or nothing arrived for `idleTimeoutSeconds`; others are skipped.
    /// Values are only stored here and parsed after the run, so the observer takes as little CPU
    /// from the bridge as possible.
    static func collect(observer: KafkaConsumer, prefix: String, expected: Int, bridges: [BridgeProcess],
                                idleTimeoutSeconds: Double, progress: @Sendable (String) -> Void) -> Collected {
        var collected = Collected()
        collected.messages.reserveCapacity(expected)
        let keyPrefix = Array((prefix + "-").utf8)
        var lastArrival = Timestamp.monotonicNanoseconds()
        var lastProgress = lastArrival
        var lastLivenessCheck = lastArrival
        while collected.messages.count < expected {
            let now = Timestamp.monotonicNanoseconds()
            guard Double(now - lastArrival) / 1e9 < idleTimeoutSeconds else {
                progress("no result for \(Int(idleTimeoutSeconds)) s: giving up")
                break
            }
            if now - lastLivenessCheck >= 500_000_000 {
                lastLivenessCheck = now
                if !bridges.allSatisfy({ $0.child.isRunning }) {
                    progress("a bridge process ended: giving up")
                    break
                }
            }
            let messages: [KafkaMessage]
            do {
                messages = try observer.poll(maxMessages: 10_000, timeoutMilliseconds: 100)
            } catch {
                progress("observer: \(error)")
                break
            }
            for message in messages where message.key.map({ $0.starts(with: keyPrefix) }) ?? false {
                let arrival = Timestamp.monotonicNanoseconds()
                lastArrival = arrival
                if collected.firstSeenNanoseconds == nil { collected.firstSeenNanoseconds = arrival }
                collected.lastSeenNanoseconds = arrival
                collected.messages.append(message)
                if let timestamp = message.timestampMilliseconds {
                    collected.firstTimestamp = min(collected.firstTimestamp, timestamp)
                    collected.lastTimestamp = max(collected.lastTimestamp, timestamp)
                }
            }
            if now - lastProgress >= 1_000_000_000 {
                lastProgress = now
                progress("  results \(collected.messages.count)/\(expected)")
            }
        }
        return collected
    }

    /// Checks every result of a peak round (`BenchmarkResultCheck`) into `round` and
    /// `mismatches`, with the results' `latency_ms` percentiles.
    static func check(_ messages: [KafkaMessage], workload: BenchmarkWorkload, into round: inout BenchmarkReport.PeakRound,
                      mismatches: inout [String], label: String) {
        let check = BenchmarkResultCheck(messages.map(\.value), workload: workload, label: label)
        round.results = messages.count
        round.delivered = check.delivered
        mismatches += check.mismatches
        round.latencyP50 = percentile(check.latencies, 0.50)
        round.latencyP99 = percentile(check.latencies, 0.99)
    }

    /// The time the bridge adds in the paced run: each result record's Kafka timestamp minus its
    /// request record's (read back from the request topic by partition and offset).
    static func measureAddedLatency(_ collected: Collected, workload: BenchmarkWorkload,
                                            environment: LocalEnvironment, into report: inout BenchmarkReport) throws {
        let requests = try KafkaTopicReader.readToEnd(bootstrapServers: environment.kafka.bootstrapServers,
                                                      topic: environment.requestTopic, timeoutMilliseconds: 60_000)
        var requestTimestamps: [Int64: Int64] = [:]
        for message in requests {
            if let timestamp = message.timestampMilliseconds {
                requestTimestamps[Int64(message.partition) << 40 | message.offset] = timestamp
            }
        }
        // Checked as the peak rounds' results are: a duplicate standing in for a late result would
        // otherwise make the count right and the tail short.
        report.mismatches += BenchmarkResultCheck(collected.messages.map(\.value), workload: workload, label: "paced run").mismatches
        var added: [Double] = []
        var answered: [Double] = []
        var unmatched = 0
        for message in collected.messages {
            guard let value = message.value, let document = try? JSONScanner.parse(value),
                  let source = document.root["source"], let partition = source["partition"]?.int64Value,
                  let offset = source["offset"]?.int64Value, let resultTimestamp = message.timestampMilliseconds,
                  let requestTimestamp = requestTimestamps[partition << 40 | offset] else {
                unmatched += 1
                continue
            }
            added.append(Double(resultTimestamp - requestTimestamp))
            if let latency = document.root["latency_ms"]?.numberText.flatMap(Double.init) {
                answered.append(latency)
            }
        }
        added.sort()
        answered.sort()
        report.pacedResults = collected.messages.count
        report.pacedWindowSeconds = collected.windowSeconds
        report.addedLatencyP50 = percentile(added, 0.50)
        report.addedLatencyP99 = percentile(added, 0.99)
        report.addedLatencyMax = added.last
        report.answerLatencyP50 = percentile(answered, 0.50)
        report.answerLatencyP99 = percentile(answered, 0.99)
        if collected.messages.count != workload.expectedResults || unmatched > 0 {
            report.mismatches.append("paced run: \(collected.messages.count) of \(workload.expectedResults) results, \(unmatched) without a matching request")
        }
    }

    /// Nearest-rank percentile of sorted values.
    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}
