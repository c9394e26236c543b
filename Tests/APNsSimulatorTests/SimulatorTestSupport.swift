import APNs
import APNsSimulator
import HTTP2
import Observability
import Testing
@_exported import TestSupport

let sampleToken = String(repeating: "ab", count: 32)
let sampleTopic = "com.example.chat"

/// A running simulator with generated credentials (and a client certificate when asked), and a
/// way to sign provider tokens at a chosen time. `stop()` closes it and removes the files.
final class SimulatorFixture: @unchecked Sendable {
    let scratch: ScratchDirectory
    let credentials: TestCredentials
    let simulator: APNsSimulator
    let clock: TestClock
    let signer: JWTSigner
    /// The client certificate files (certificate auth), when made.
    let clientCertificate: CertificateFiles?

    init(faults: APNsSimulatorFaults = APNsSimulatorFaults(), maxConcurrentStreams: Int = 100, maxConnections: Int? = nil,
         clientCertificateCommonName: String? = nil, answerOverride: APNsSimulator.AnswerOverride? = nil) throws {
        scratch = try ScratchDirectory()
        credentials = try TestCredentials.generate(in: scratch.path)
        var configuration = credentials.simulatorConfiguration()
        configuration.faults = faults
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.maxConnections = maxConnections
        if let clientCertificateCommonName {
            let authority = try CertificateAuthority(commonName: "client CA")
            let files = try authority.writeFiles(to: scratch.path + "/clients", clientCommonName: clientCertificateCommonName)
            configuration.clientCAFile = files.caCertificatePath
            clientCertificate = files
        } else {
            clientCertificate = nil
        }
        let clock = TestClock(Timestamp.nowMilliseconds() / 1000)
        self.clock = clock
        simulator = try APNsSimulator(configuration: configuration, clock: clock.function, answerOverride: answerOverride)
        signer = JWTSigner(key: try APNsSigningKey(pemFile: credentials.authKeyFile),
                           keyID: credentials.keyID, teamID: credentials.teamID)
        try simulator.start()
    }

    /// `bearer <JWT>` issued `secondsAgo` before the simulator's clock.
    func authorization(issuedSecondsAgo secondsAgo: Int64 = 0) throws -> String {
        "bearer " + (try signer.sign(issuedAt: clock.now - secondsAgo))
    }

    /// A valid alert request for `token` with `authorization` (none: certificate auth).
    func request(authorization: String?, token: String = sampleToken, topic: String? = sampleTopic,
                 pushType: APNsPushType = .alert) -> HTTP2Request {
        let notification = APNsNotification(token: token, pushType: pushType, topic: topic ?? "",
                                            payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        var request = notification.makeRequest(authorization: authorization)
        if topic == nil { request.headers.removeAll { $0.name == "apns-topic" } }
        return request
    }

    /// A client connection to the simulator, trusting its CA (and presenting the client
    /// certificate when `presentCertificate`).
    func client(presentCertificate: Bool = false, streamTimeout: Duration = .seconds(10)) throws -> SimulatorClient {
        var configuration = TLSClientConfiguration(caFile: credentials.caFile)
        if presentCertificate, let files = clientCertificate {
            configuration.certificateFile = files.clientCertificatePath
            configuration.privateKeyFile = files.clientPrivateKeyPath
        }
        return try SimulatorClient(port: simulator.port, tls: try TLSClientContext(configuration),
                                   streamTimeout: streamTimeout)
    }

    func stop() {
        simulator.close()
        scratch.remove()
    }
}

/// One real `HTTP2ClientConnection` to the simulator on its own loop, recording what it reports.
final class SimulatorClient: HTTP2ClientConnectionDelegate, @unchecked Sendable {
    struct Record {
        var ready = false
        var settings: [Int] = []
        var results: [UInt64: Result<HTTP2Response, HTTP2StreamFailure>] = [:]
        var closeReason: String?
    }

    let loop: EventLoop
    let record = Locked(Record())
    private(set) var connection: HTTP2ClientConnection!
    private var nextTag: UInt64 = 0

    init(port: Int, tls: TLSClientContext, streamTimeout: Duration) throws {
        loop = try EventLoop(name: "simulator-test-client")
        connection = HTTP2ClientConnection(host: "127.0.0.1", port: port, tls: tls, loop: loop, delegate: self,
                                           streamTimeoutNanoseconds: streamTimeout.loopNanosecondsForTests)
    }

    /// Starts connecting and waits until the connection is ready or closed; true when ready.
    func connect() async -> Bool {
        let connection = self.connection!
        loop.execute { connection.start() }
        _ = await eventually { record.withLock { $0.ready || $0.closeReason != nil } }
        return record.withLock { $0.ready }
    }

    /// Submits `requests` in one batch; returns their tags (in order) for those accepted.
    func send(_ requests: [HTTP2Request]) async -> [UInt64] {
        let first = nextTag
        nextTag += UInt64(requests.count)
        let connection = self.connection!
        return await withCheckedContinuation { continuation in
            loop.execute {
                var accepted: [UInt64] = []
                for (offset, request) in requests.enumerated() where connection.submit(request, tag: first + UInt64(offset)) {
                    accepted.append(first + UInt64(offset))
                }
                connection.flush()
                continuation.resume(returning: accepted)
            }
        }
    }

    /// Sends `requests` and waits until each accepted one finished; their results by tag order.
    func exchange(_ requests: [HTTP2Request]) async -> [Result<HTTP2Response, HTTP2StreamFailure>] {
        let tags = await send(requests)
        let finished = await eventually { record.withLock { record in tags.allSatisfy { record.results[$0] != nil } } }
        #expect(finished, "\(tags.count) requests sent, not all of them finished")
        return record.withLock { record in tags.compactMap { record.results[$0] } }
    }

    func ping() {
        let connection = self.connection!
        loop.execute { connection.ping() }
    }

    var closeReason: String? { record.withLock { $0.closeReason } }
    var lastSettings: Int? { record.withLock { $0.settings.last } }

    func stop() async {
        let connection = self.connection!
        loop.execute { connection.close() }
        _ = await eventually { closeReason != nil }
        loop.shutdown()
    }

    func connectionDidBecomeReady(_ connection: HTTP2ClientConnection) {
        record.withLock { $0.ready = true }
    }

    func connection(_ connection: HTTP2ClientConnection, didFinishStream tag: UInt64,
                    result: Result<HTTP2Response, HTTP2StreamFailure>) {
        record.withLock { $0.results[tag] = result }
    }

    func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {
        record.withLock { $0.settings.append(maxConcurrentStreams) }
    }

    func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String) {
        record.withLock { $0.closeReason = reason }
    }
}

extension Duration {
    var loopNanosecondsForTests: UInt64 {
        UInt64(components.seconds) * 1_000_000_000 + UInt64(components.attoseconds / 1_000_000_000)
    }
}

extension Result<HTTP2Response, HTTP2StreamFailure> {
    /// The answer's status and APNs reason, or nil for a stream failure.
    var statusAndReason: (status: Int, reason: APNsReason?)? {
        guard case .success(let response) = self else { return nil }
        let parsed = APNsResponse(response)
        return (parsed.status, parsed.reason)
    }

    var failure: HTTP2StreamFailure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
