import APNsSimulator
import Bridge
import BridgeLocal
import Foundation
import Kafka
import Testing
import TestSupport

/// The bridge killed with SIGKILL in the middle of its work: after a restart every token of every
/// request has a result with its expected outcome and every unusable record its dead letter (at
/// least once: some may have two), and the offsets end fully committed.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct CrashRecoveryTests {
    /// kill -9 with work in flight, then a restart: every expected output at least once, nothing
    /// unexpected, every offset committed.
    @Test func aBridgeKilledMidRunLosesNothingAfterARestart() throws {
        let scenario = try KafkaFaultScenario(groupID: "crash-kill-9", brokers: 1)
        defer { scenario.close() }
        let environment = scenario.environment
        // A third of the streams are never answered: those notifications are still in flight
        // (waiting for request_timeout) when the first bridge is killed.
        try environment.simulator.setFaults(APNsSimulatorFaults(stallRate: 0.3))
        try environment.produceRequests(scenario.workload.records)
        let configFile = try TemporaryFile(contents: scenario.configurationYAML())

        let first = try CapturedProcess(BridgeBinary.url, ["run", "--config", configFile.path])
        let someDone = waitFor(timeout: .seconds(60), every: .milliseconds(100)) {
            (scenario.committedCount() ?? 0) > 0
        }
        #expect(someDone, "the first bridge committed nothing")
        kill(first.process.processIdentifier, SIGKILL)
        #expect(waitFor(timeout: .seconds(10)) { !first.process.isRunning })
        let committedAtCrash = scenario.committedCount() ?? 0
        #expect(committedAtCrash < Int64(scenario.workload.records.count), "everything was done before the crash")

        try environment.simulator.setFaults(APNsSimulatorFaults())
        let second = try CapturedProcess(BridgeBinary.url, ["run", "--config", configFile.path])
        #expect(scenario.waitUntilCommitted(scenario.workload.records.count),
                "committed \(scenario.committedCount() ?? -1) of \(scenario.workload.records.count)")
        #expect(second.stop() == 0)

        let outputs = scenario.settledOutputs(allowingDuplicates: true)
        let problems = outputs.problems(against: scenario.workload, requests: scenario.workload.records)
        // Also every unusable record has a dead letter (maybe two), and no other record has one.
        #expect(problems.isEmpty, "\(problems.count) problems: \(problems.prefix(5))")
    }
}
