import HTTP2
import Synchronization
import Testing
@testable import APNsSimulator
import APNs

/// Drives one real `HTTP2ClientConnection`: submits every request when ready, closes when all
/// streams finished, and hands back the results by tag.
private final class ClientProbe: HTTP2ClientConnectionDelegate, @unchecked Sendable {
    typealias Results = [UInt64: Result<HTTP2Response, HTTP2StreamFailure>]

    private let requests: [HTTP2Request]
    // Touched only on the connection's loop thread after `run` hands the connection over.
    private var results: Results = [:]
    private var connection: HTTP2ClientConnection?
    private var continuation: CheckedContinuation<(Results, String), Never>?
    /// The last SETTINGS_MAX_CONCURRENT_STREAMS the server announced (read after `run` returns).
    private(set) var announcedMaxConcurrentStreams = 0

    init(requests: [HTTP2Request]) {
        self.requests = requests
    }

    func run(host: String, port: Int, tls: TLSClientContext, loop: EventLoop) async -> (Results, String) {
        await withCheckedContinuation { continuation in
            self.continuation = continuation
            let connection = HTTP2ClientConnection(host: host, port: port, tls: tls, loop: loop, delegate: self,
                                                   streamTimeoutNanoseconds: 10_000_000_000)
            self.connection = connection
            loop.execute { connection.start() }
        }
    }

    func connectionDidBecomeReady(_ connection: HTTP2ClientConnection) {
        for (tag, request) in requests.enumerated() {
            _ = connection.submit(request, tag: UInt64(tag))
        }
        connection.flush()
    }

    func connection(_ connection: HTTP2ClientConnection, didFinishStream tag: UInt64,
                    result: Result<HTTP2Response, HTTP2StreamFailure>) {
        results[tag] = result
        if results.count == requests.count { connection.close() }
    }

    func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {
        announcedMaxConcurrentStreams = maxConcurrentStreams
    }

    func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String) {
        self.connection = nil
        continuation?.resume(returning: (results, reason))
        continuation = nil
    }
}

@Suite struct APNsSimulatorTests {
    @Test(.timeLimit(.minutes(1)))
    func answersARealHTTP2ClientOverTLS() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let credentials = try TestCredentials.generate(in: scratch.path)
        let unregistered = String(repeating: "0f", count: 32)
        var configuration = credentials.simulatorConfiguration()
        configuration.unregisteredTokens = [unregistered: 1_700_000_000_456]
        configuration.sendsUniqueID = true
        let overloadedToken = String(repeating: "99", count: 32)
        let simulator = try APNsSimulator(configuration: configuration, answerOverride: { request in
            request.path.hasSuffix(overloadedToken)
                ? APNsSimulatorAnswer(status: 503, headers: [], body: Array(#"{"reason":"ServiceUnavailable"}"#.utf8),
                                      reason: .serviceUnavailable)
                : nil
        })
        try simulator.start()
        defer { simulator.close() }
        #expect(simulator.port > 0)

        let signer = JWTSigner(key: try APNsSigningKey(pemFile: credentials.authKeyFile),
                               keyID: credentials.keyID, teamID: credentials.teamID)
        let authorization = try APNsTokenProvider(signer: signer).authorizationHeaderValue()
        let payload = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
        let apnsID = "0e9c4a5e-7f1b-4c3d-9a2e-1b2c3d4e5f60"
        func notification(_ token: String, pushType: APNsPushType = .alert) -> APNsNotification {
            APNsNotification(token: token, pushType: pushType, topic: sampleTopic, payload: payload)
        }
        var withID = notification(sampleToken)
        withID.apnsID = apnsID
        let requests = [
            withID.makeRequest(authorization: authorization),
            notification(unregistered).makeRequest(authorization: authorization),
            notification(sampleToken).makeRequest(authorization: nil),
            notification("abc").makeRequest(authorization: authorization),
            notification(sampleToken, pushType: .voip).makeRequest(authorization: authorization),
            notification(overloadedToken).makeRequest(authorization: authorization),
        ]

        let group = try EventLoopGroup(threads: 1, name: "apns-simulator-test-client")
        defer { group.shutdown() }
        let probe = ClientProbe(requests: requests)
        let tls = try TLSClientContext(TLSClientConfiguration(caFile: credentials.caFile))
        let (results, _) = await probe.run(host: "127.0.0.1", port: simulator.port, tls: tls, loop: group.next())
        try #require(results.count == requests.count)
        #expect(probe.announcedMaxConcurrentStreams == 1000)

        func response(_ tag: UInt64) throws -> APNsResponse {
            let answer = try #require(try results[tag]?.get())
            return APNsResponse(answer)
        }
        let delivered = try response(0)
        #expect(delivered.status == 200 && delivered.apnsID == apnsID && delivered.apnsUniqueID != nil)
        #expect(APNsResponseClassifier.classify(delivered) == .delivered)
        let gone = try response(1)
        #expect(gone.status == 410 && gone.reason == .unregistered && gone.timestamp == 1_700_000_000_456)
        #expect(try response(2).reason == .missingProviderToken)
        #expect(try response(3).reason == .badDeviceToken)
        #expect(try response(4).reason == .badTopic)
        #expect(APNsResponseClassifier.classify(try response(5)) == .retry)
    }

    @Test func startFailsOnMissingCertificateFiles() throws {
        let configuration = APNsSimulatorConfiguration(certificateFile: "/nonexistent/cert.pem",
                                                       privateKeyFile: "/nonexistent/key.pem")
        let simulator = try APNsSimulator(configuration: configuration)
        #expect(throws: (any Error).self) { try simulator.start() }
        #expect(simulator.port == 0)
        simulator.close()
    }
}
