import APNs
import HTTP2
import Testing
@testable import APNsSimulator

/// The simulator's hostile answers reach a real client over TLS + HTTP/2 as sent. (How the bridge
/// copes with them is proven by the client's and the pipeline's tests.)
@Suite(.serialized, .timeLimit(.minutes(1)))
struct APNsSimulatorHostileAnswerTests {
    /// Sends one valid notification with `mode` on and returns its result.
    private func exchange(_ mode: APNsSimulatorHostileAnswer,
                          check: (SimulatorFixture, SimulatorClient) async -> Void = { _, _ in })
    async throws -> Result<HTTP2Response, HTTP2StreamFailure>? {
        let fixture = try SimulatorFixture(faults: APNsSimulatorFaults(hostileAnswer: mode))
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let result = await client.exchange([fixture.request(authorization: try fixture.authorization())]).first
        await check(fixture, client)
        // Requests the rules reject keep Apple's answer.
        let rejected = await client.exchange([fixture.request(authorization: try fixture.authorization(), token: "abc")])
        #expect(rejected.first?.statusAndReason?.reason == .badDeviceToken)
        await client.stop()
        return result
    }

    @Test func unknownReason() async throws {
        let answer = try await exchange(.unknownReason)?.statusAndReason
        #expect(answer?.status == 400)
        #expect(answer?.reason == .unknown(APNsSimulatorHostileAnswer.unknownReasonText))
    }

    @Test func nonJSONErrorBody() async throws {
        let response = try #require(try await exchange(.nonJSONErrorBody)?.get())
        #expect(response.status == 500)
        #expect(String(decoding: response.body, as: UTF8.self).hasPrefix("<html>"))
    }

    @Test func hugeErrorBodyIsSentWhole() async throws {
        var answered: [Int: Int] = [:]
        let result = try await exchange(.hugeErrorBody(bytes: 1 << 20)) { fixture, _ in
            answered = fixture.simulator.statistics.answersByStatus
        }
        #expect(answered[400] == 1)
        // A client that caps what it reads may reset the stream instead; one that reads it all gets every byte.
        if case .success(let response)? = result {
            #expect(response.status == 400 && response.body.count == 1 << 20)
        }
        #expect(result != nil)
    }

    @Test func bodyOnSuccess() async throws {
        let response = try #require(try await exchange(.bodyOnSuccess)?.get())
        #expect(response.status == 200)
        #expect(response.body == Array(#"{"unexpected":true}"#.utf8))
    }

    @Test func oversizedHeader() async throws {
        var answered: [Int: Int] = [:]
        // The largest the fault takes still leaves the server.
        let result = try await exchange(.oversizedHeader(bytes: APNsSimulatorHostileAnswer.maximumHeaderBytes)) { fixture, _ in
            answered = fixture.simulator.statistics.answersByStatus
        }
        #expect(answered[200] == 1)
        // The client keeps at most `maxResponseHeaderBytes` of headers per stream: the answer
        // arrives, the oversized header is dropped.
        let response = try #require(try result?.get())
        #expect(response.status == 200)
        #expect(APNsSimulatorHostileAnswer.maximumHeaderBytes > HTTP2ClientConnection.maxResponseHeaderBytes)
        #expect(response.headers.first { $0.name == "x-oversized" } == nil)
    }

    /// More than the 1,000 acknowledgements nghttp2 holds unsent before it calls a peer a flood
    /// arrive at once: the client answers each as it reads (a peer that reads its answers is no
    /// flood), and the exchange goes on.
    @Test(arguments: [50, 5000])
    func pingFloodIsAcknowledgedByTheClient(count: Int) async throws {
        let result = try await exchange(.pingFlood(count: count)) { fixture, _ in
            #expect(await eventually { fixture.simulator.statistics.pingAcknowledgementsReceived == count })
        }
        #expect(result?.statusAndReason?.status == 200)
    }

    @Test(arguments: [20, 5000])
    func settingsFloodIsAcknowledgedByTheClient(count: Int) async throws {
        let result = try await exchange(.settingsFlood(count: count)) { fixture, _ in
            // The initial SETTINGS and those of the flood.
            #expect(await eventually { fixture.simulator.statistics.settingsAcknowledgementsReceived == count + 1 })
        }
        #expect(result?.statusAndReason?.status == 200)
    }

    @Test func commandLineSpellings() {
        #expect(APNsSimulatorHostileAnswer(argument: "unknown-reason") == .unknownReason)
        #expect(APNsSimulatorHostileAnswer(argument: "non-json") == .nonJSONErrorBody)
        #expect(APNsSimulatorHostileAnswer(argument: "body-on-200") == .bodyOnSuccess)
        #expect(APNsSimulatorHostileAnswer(argument: "huge-body:1048576") == .hugeErrorBody(bytes: 1 << 20))
        #expect(APNsSimulatorHostileAnswer(argument: "oversized-header:9000") == .oversizedHeader(bytes: 9000))
        #expect(APNsSimulatorHostileAnswer(argument: "ping-flood:10") == .pingFlood(count: 10))
        #expect(APNsSimulatorHostileAnswer(argument: "settings-flood:3") == .settingsFlood(count: 3))
        for bad in ["", "ping-flood", "ping-flood:x", "non-json:3", "teapot"] {
            #expect(APNsSimulatorHostileAnswer(argument: bad) == nil, "\(bad)")
        }
    }

    @Test func sizesAndCountsAreBounded() {
        #expect(APNsSimulatorFaults(hostileAnswer: .hugeErrorBody(bytes: 0)).problem != nil)
        #expect(APNsSimulatorFaults(hostileAnswer: .oversizedHeader(bytes: 65 << 20)).problem != nil)
        // nghttp2 sends no header block above 64 KiB: such an answer would be counted but never sent.
        #expect(APNsSimulatorFaults(hostileAnswer: .oversizedHeader(bytes: 64 << 10)).problem != nil)
        #expect(APNsSimulatorFaults(hostileAnswer: .hugeErrorBody(bytes: 64 << 20)).problem == nil)
        #expect(APNsSimulatorFaults(hostileAnswer: .pingFlood(count: 0)).problem != nil)
        #expect(APNsSimulatorFaults(hostileAnswer: .settingsFlood(count: 10_001)).problem != nil)
        #expect(APNsSimulatorFaults(hostileAnswer: .settingsFlood(count: 10_000)).problem == nil)
        #expect(APNsSimulatorFaults(hostileAnswer: .pingFlood(count: 100_000)).problem == nil)
        #expect(APNsSimulatorFaults(hostileAnswer: .unknownReason).problem == nil)
    }
}
