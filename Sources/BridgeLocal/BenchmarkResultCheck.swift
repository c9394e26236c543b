import Bridge
import JSON

/// The check of one phase's result records against its workload: every expected (request,
/// token) exactly once, each `delivered`, nothing else. Its `latency_ms` values come along.
public struct BenchmarkResultCheck: Sendable {
    /// Results that said `delivered`.
    public private(set) var delivered = 0
    /// Every readable result's `latency_ms`, sorted.
    public private(set) var latencies: [Double] = []
    /// What is wrong, each line starting with the phase's label (empty when all is well).
    public private(set) var mismatches: [String] = []

    /// Checks `values` (result record values, in any order) of the phase `label` against
    /// `workload`'s expected keys.
    public init(_ values: [[UInt8]?], workload: BenchmarkWorkload, label: String) {
        var missing = workload.expectedKeys
        latencies.reserveCapacity(values.count)
        for value in values {
            guard let document = try? JSONScanner.parse(value ?? []),
                  let requestID = document.root["request_id"]?.stringValue,
                  let token = document.root["token"]?.stringValue,
                  let outcome = document.root["outcome"]?.stringValue,
                  let latency = document.root["latency_ms"]?.numberText.flatMap(Double.init) else {
                mismatches.append("\(label): an unreadable result")
                continue
            }
            latencies.append(latency)
            if missing.remove(DemoWorkload.outcomeKey(requestID: requestID, token: token)) == nil {
                mismatches.append("\(label): \(requestID): a duplicate or unexpected result")
            }
            if outcome == PushOutcome.delivered.rawValue {
                delivered += 1
            } else {
                mismatches.append("\(label): \(requestID): outcome \(outcome)")
            }
        }
        if !missing.isEmpty {
            mismatches.append("\(label): \(missing.count) expected result(s) missing")
        }
        latencies.sort()
    }
}
