import APNsSimulator
import BridgeLocal
import Foundation
import Testing
import TestSupport

/// `limits.max_in_flight` bounds memory (contract §6): a backlog far larger than the limit stays
/// in Kafka, not in the bridge's memory.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct InFlightMemoryTests {
    /// Whether this test process, and so the `apns-bridge` built beside it, runs under
    /// AddressSanitizer or ThreadSanitizer: their shadow memory makes resident memory say nothing
    /// of the bridge's own.
    static let sanitized: Bool = {
        let handle = dlopen(nil, RTLD_NOW)
        return dlsym(handle, "__asan_init") != nil || dlsym(handle, "__tsan_init") != nil
    }()

    /// 40,000 requests of 3.6 KB (144 MB) behind an APNs that never answers, with
    /// `max_in_flight` 200: the `apns-bridge run` process takes 200, pauses fetching, and its
    /// resident memory (its peak too) stays far below what holding the backlog would take.
    @Test(.disabled(if: sanitized, "resident memory of a sanitized build"))
    func aBacklogBehindAStalledAPNsStaysInKafka() throws {
        let count = 40_000
        let alert = String(repeating: "m", count: 3_500)
        let records = (0..<count).map { index in
            DemoWorkload.Record(
                key: Array("m-\(index)".utf8),
                value: Array(#"{"token":"\#(String(format: "%064x", index + 1))","payload":{"aps":{"alert":"\#(alert)"}}}"#.utf8))
        }
        // The mock cluster keeps 5 MB per partition: enough partitions to hold the whole backlog.
        let partitions = MockPartitionBudget.partitionsNeeded(records: count, bytesPerRecord: records[0].value.count + 8)
        let environment = try LocalEnvironment(partitions: Int32(partitions))
        defer { environment.close() }
        try environment.produceRequests(records)
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 1))
        let maxInFlight = 200
        let yaml = environment.configurationYAML(groupID: "e2e-memory", extra: "limits: {max_in_flight: \(maxInFlight)}")
            .replacingOccurrences(of: "request_timeout: 10s", with: "request_timeout: 60s")
            .replacingOccurrences(of: "shutdown_timeout: 10s", with: "shutdown_timeout: 1s")
        #expect(yaml.contains("request_timeout: 60s") && yaml.contains("shutdown_timeout: 1s"))
        let bridge = try BridgeProcess(executable: BridgeBinary.url.path, yaml: yaml, instanceID: "memory")

        #expect(waitFor(timeout: .seconds(60)) {
            (bridge.metric("apns_bridge_fetch_pauses_total") ?? 0) >= 1 && (bridge.metric("apns_bridge_in_flight") ?? 0) >= Double(maxInFlight)
        }, "\(bridge.logTail)")
        // The limit is passed by one request at most (here one token).
        #expect((bridge.metric("apns_bridge_records_consumed_total") ?? 0) <= Double(maxInFlight + 1))
        // Measured on the debug build (2 cores): held back like this, VmRSS 39-72 MB and VmHWM
        // 107-135 MB (the peak is librdkafka's prefetch, bounded by its own queued.max.messages.kbytes,
        // filled in the second before the pause and purged by it); with the limit lifted
        // (max_in_flight 100,000: the whole backlog admitted) VmRSS 215 MB and VmHWM 273 MB.
        // librdkafka purges the prefetch on its own threads after the pause: the resident memory
        // is waited for, not read once at the moment the pause is counted.
        var sample = try #require(ProcessSample(pid: bridge.child.pid))
        let settled = waitFor(timeout: .seconds(15), every: .milliseconds(100)) {
            if let latest = ProcessSample(pid: bridge.child.pid) { sample = latest }
            return sample.residentKilobytes < 120 * 1024
        }
        #expect(settled, "VmRSS \(sample.residentKilobytes) kB")
        #expect(sample.peakResidentKilobytes < 200 * 1024, "VmHWM \(sample.peakResidentKilobytes) kB")
        _ = bridge.stop(timeoutSeconds: 30)
    }
}
