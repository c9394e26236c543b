import APNs
import CNGHTTP2
import Observability
@testable import HTTP2
import Testing
@testable import APNsSimulator

/// What the simulator keeps of one request is bounded, whatever a client sends: header lists
/// by the announced SETTINGS_MAX_HEADER_LIST_SIZE, bodies by Apple's largest payload.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct APNsSimulatorRequestLimitTests {
    /// `count` extra `x-pad` headers of `bytes` each, all alike: HPACK sends the first one into
    /// the dynamic table and every later one as a one-byte reference to it.
    private func padded(_ request: HTTP2Request, count: Int, bytes: Int) -> HTTP2Request {
        var request = request
        request.headers += Array(repeating: (name: "x-pad", value: String(repeating: "x", count: bytes)), count: count)
        return request
    }

    @Test func aHeaderListAboveTheAnnouncedMaximumResetsTheStream() async throws {
        let fixture = try SimulatorFixture()
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        #expect(await client.announcedSetting(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE) == 8000, "as APNs announces")
        let plain = fixture.request(authorization: try fixture.authorization())
        let results = await client.exchange([padded(plain, count: 20, bytes: 3000), padded(plain, count: 2, bytes: 3000), plain])
        try #require(results.count == 3)
        #expect(results[0].failure == .reset(code: enhanceYourCalm))
        #expect(results[1].statusAndReason?.status == 200, "a header list under the maximum is taken")
        #expect(results[2].statusAndReason?.status == 200, "the connection carries on")
        #expect(fixture.simulator.statistics.requestsReceived == 2)
        #expect(client.closeReason == nil)
        await client.stop()
    }

    @Test func aBodyAboveApplesLargestPayloadIsCountedNotKeptAndAnswered413() async throws {
        let seen = Locked<[(kept: Int, length: Int)]>([])
        let fixture = try SimulatorFixture(answerOverride: { request in
            seen.withLock { $0.append((request.body.count, request.bodyLength)) }
            return nil
        })
        defer { fixture.stop() }
        let client = try fixture.client()
        #expect(await client.connect())
        let authorization = try fixture.authorization()
        var huge = fixture.request(authorization: authorization)
        huge.body = [UInt8](repeating: 0x20, count: 2 << 20)
        var voip = fixture.request(authorization: authorization, topic: sampleTopic + ".voip", pushType: .voip)
        voip.body = [UInt8](repeating: 0x20, count: 5120)
        let results = await client.exchange([huge, voip])
        try #require(results.count == 2)
        #expect(results[0].statusAndReason?.status == 413)
        #expect(results[0].statusAndReason?.reason == .payloadTooLarge)
        #expect(results[1].statusAndReason?.status == 200, "Apple's largest payload is kept whole")
        let requests = seen.withLock { $0 }.sorted { $0.length < $1.length }   // the smaller one may finish first
        #expect(requests.map(\.kept) == [5120, APNsSimulator.keptBodyBytes])
        #expect(requests.map(\.length) == [5120, 2 << 20])
        #expect(client.closeReason == nil)
        await client.stop()
    }
}

extension SimulatorClient {
    /// The simulator's value of SETTINGS parameter `id`, as the client's session holds it.
    func announcedSetting(_ id: nghttp2_settings_id) async -> UInt32? {
        let connection = self.connection!
        return await withCheckedContinuation { continuation in
            loop.execute {
                continuation.resume(returning: connection.session.map { nghttp2_session_get_remote_settings($0, id) })
            }
        }
    }
}

/// RST_STREAM's ENHANCE_YOUR_CALM (RFC 9113 §7).
private let enhanceYourCalm: UInt32 = 0xb
