import Foundation
import HTTP2
import Testing
import TestSupport
@testable import APNs
import APNsSimulator
import Observability

/// Answers by the last path component (the device token's first two hex digits choose):
/// `aa…` 418 with a huge non-JSON body and a hundred headers, `bb…` 400 with a reason Apple
/// may add one day, `cc…` 502, anything else 200.
private final class ScriptedHandler: HTTP2ServerHandler {
    func handle(_ request: HTTP2ServerRequest, responder: HTTP2Responder) {
        let token = request.path.split(separator: "/").last.map(String.init) ?? ""
        switch token.prefix(2) {
        case "aa":
            let headers = (0..<100).map { (name: "x-filler-\($0)", value: String(repeating: "v", count: 150)) }
            responder.respond(status: 418, headers: headers, body: [UInt8](repeating: UInt8(ascii: "x"), count: 3 << 20))
        case "bb":
            responder.respond(status: 400, headers: [], body: Array(#"{"reason":"SomethingAppleAdded"}"#.utf8))
        case "cc":
            responder.respond(status: 502, headers: [], body: Array("<html>Bad Gateway</html>".utf8))
        default:
            responder.respond(status: 200, headers: [], body: [])
        }
    }
}

@Suite struct APNsClientAnswerTests {
    @Test(.timeLimit(.minutes(1)))
    func oddAnswersAreClassifiedWithoutCrashingOrBufferingWithoutBound() async throws {
        let environment = try ClientEnvironment()
        defer { environment.tearDown() }
        let group = try EventLoopGroup(threads: 1, name: "scripted-server")
        defer { group.shutdown() }
        let server = try HTTP2Server(
            host: "127.0.0.1", port: 0,
            tls: TLSServerContext(certificateFile: environment.credentials.serverCertificateFile,
                                  privateKeyFile: environment.credentials.serverPrivateKeyFile),
            group: group, maxConcurrentStreams: 100, handler: ScriptedHandler())
        defer { server.close() }
        let recorder = DeliveryRecorder()
        let client = environment.makeClient(port: server.port, connections: 1, delegate: recorder, maxAttempts: 3)
        defer { client.shutdown() }
        client.start()
        let tokens = ["aa", "bb", "cc", "dd"].map { $0 + String(repeating: "0", count: 62) }
        client.send(tokens.enumerated().map {
            APNsPendingNotification(notification: notification(token: $0.element), tag: UInt64($0.offset))
        })
        #expect(await eventually { recorder.callCount >= 4 })
        let snapshot = recorder.snapshot

        // A 3 MiB non-JSON body and 100 headers: answered, not retried, no reason, body cut.
        let huge = try #require(snapshot[0]?.first?.result)
        guard case .response(let oddResponse) = huge.outcome else {
            Issue.record("418: \(huge.outcome)")
            return
        }
        #expect(oddResponse.status == 418 && oddResponse.reason == nil && huge.attempts == 1)
        #expect(APNsResponseClassifier.classify(oddResponse) == .rejected(invalidToken: false))

        // An unknown reason is kept verbatim; a 4xx is final.
        let unknown = try #require(snapshot[1]?.first?.result)
        guard case .response(let unknownResponse) = unknown.outcome else {
            Issue.record("400: \(unknown.outcome)")
            return
        }
        #expect(unknownResponse.reason == .unknown("SomethingAppleAdded") && unknown.attempts == 1)

        // Every 5xx is retried: 502 until max_attempts.
        let gateway = try #require(snapshot[2]?.first?.result)
        guard case .response(let gatewayResponse) = gateway.outcome else {
            Issue.record("502: \(gateway.outcome)")
            return
        }
        #expect(gatewayResponse.status == 502 && gateway.attempts == 3)
        #expect(recorder.retries[.status5xx] == 2)
        #expect(status(snapshot[3]) == 200)
        #expect(recorder.callCount == 4)
    }
}
