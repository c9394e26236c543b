import APNs
import CNGHTTP2
@testable import HTTP2
import Testing
@testable import APNsSimulator

/// What the simulator keeps of one request is bounded, whatever a client sends: header lists
/// by the announced SETTINGS_MAX_HEADER_LIST_SIZE.
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
