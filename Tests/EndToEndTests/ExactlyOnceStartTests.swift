import APNsSimulator
@testable import Bridge
import BridgeLocal
import Foundation
import Kafka
import Testing
import TestSupport

/// Exactly once, nothing goes to APNs before the producer's transactions are initialised: an
/// initialisation that then failed for good (a transactional id the broker does not authorise)
/// would stop the bridge with those notifications sent and their offsets uncommitted, and every
/// restart would send them again.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ExactlyOnceStartTests {
    @Test func nothingIsSentToAPNsBeforeTransactionsAreInitialised() throws {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let token = String(repeating: "5c", count: 32)
        try environment.produceRequests((0..<10).map { index in
            DemoWorkload.Record(key: Array("k\(index)".utf8),
                                value: Array(#"{"id":"start-\#(index)","token":"\#(token)","payload":{"aps":{}}}"#.utf8))
        })
        // The coordinator answers the first 12 InitProducerId requests "not available", each a
        // second late: initialisation takes at least 12 s, while the group is joined within a
        // few, even under a sanitizer.
        environment.kafka.pushBrokerRequestErrors(broker: 1, apiKey: MockKafkaCluster.APIKey.initProducerID,
                                                  errors: Array(repeating: 15, count: 12), rttMilliseconds: 1_000)
        let pipeline = try BridgePipeline(configuration: try environment.configuration(groupID: "eos-start", exactlyOnce: true))
        let committer = try #require(pipeline.committer)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            _ = pipeline.run()
            finished.signal()
        }.start()
        defer {
            pipeline.requestStop()
            _ = finished.wait(timeout: .now() + 30)
        }

        #expect(waitFor(timeout: .seconds(30)) { pipeline.assignedPartitionCount == 1 })
        // From the assignment until transactions are ready, APNs sees no request and `/readyz`
        // says why. The count and `/readyz` are read before the committer, so a request counted
        // (or a readiness seen) while it was not ready was sent (or shown) while not ready.
        var checksWhileNotReady = 0
        let ready = waitFor(timeout: .seconds(60), every: .milliseconds(20)) {
            let requests = environment.simulator.statistics.requestsReceived
            let readiness = pipeline.readiness
            guard !committer.isReady else { return true }
            checksWhileNotReady += 1
            #expect(requests == 0)
            #expect(readiness == .notReady(BridgePipeline.transactionsNotInitialisedReason))
            return false
        }
        #expect(ready)
        try #require(checksWhileNotReady > 0, "transactions were ready before the partition was assigned: nothing was shown")

        // Then everything is delivered and committed, and the bridge is ready.
        #expect(waitFor(timeout: .seconds(60)) { environment.simulator.statistics.requestsReceived == 10 })
        #expect(waitFor(timeout: .seconds(30)) { pipeline.readiness == .ready })
        #expect(waitFor(timeout: .seconds(30)) {
            (try? environment.committedRequestCount(groupID: "eos-start")) == 10
        })
    }
}
