import Foundation
import HTTP2
import Testing

/// The in-memory replay the response-path fuzzer runs (fuzz/targets/fuzz-http2-response): the
/// seed corpus gives the answers it was written to give, and every input the fuzzer found a
/// problem with finishes every stream once.
@Suite struct HTTP2ResponseReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("fuzz/corpus/http2-response")

    /// Replays `bytes` after the handshake with three streams open (tags 1, 2, 3).
    static func replay(_ bytes: [UInt8]) async throws -> HTTP2ResponseReplay.Outcome {
        let loop = try EventLoop(name: "replay")
        defer { loop.shutdown() }
        let tls = try TLSClientContext(TLSClientConfiguration())
        let outcome = await onLoop(loop) { Result { try HTTP2ResponseReplay.run(serverBytes: bytes, streams: 3, loop: loop, tls: tls) } }
        return try outcome.get()
    }

    static func seed(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: corpus.appendingPathComponent(name)))
    }

    /// Each stream's result by tag, after checking that each finished exactly once.
    static func resultsByTag(_ outcome: HTTP2ResponseReplay.Outcome) -> [UInt64: Result<HTTP2Response, HTTP2StreamFailure>] {
        #expect(outcome.wasReady)
        #expect(outcome.submittedTags == [1, 2, 3])
        #expect(outcome.results.map(\.tag).sorted() == [1, 2, 3])
        #expect(outcome.closeReason != nil)
        return Dictionary(outcome.results.map { ($0.tag, $0.result) }, uniquingKeysWith: { first, _ in first })
    }

    @Test func answersOnEveryStreamAreResponses() async throws {
        let results = Self.resultsByTag(try await Self.replay(try Self.seed("200-each-stream")))
        for tag: UInt64 in [1, 2, 3] {
            let response = try #require(try? results[tag]?.get())
            #expect(response.status == 200)
            #expect(response.header("apns-id")?.hasPrefix("0E9C3B44-") == true)
        }
    }

    @Test func errorBodiesArriveWhole() async throws {
        let results = Self.resultsByTag(try await Self.replay(try Self.seed("body-in-many-data-frames")))
        let response = try #require(try? results[1]?.get())
        #expect(response.status == 400)
        #expect(String(decoding: response.body, as: UTF8.self) == "{\"reason\":\"PayloadTooLarge\"}")
        #expect(results[2].map { if case .failure(.connectionLost) = $0 { true } else { false } } == true)
    }

    @Test func resetsAndGoAwayTellRefusedFromReset() async throws {
        let resets = Self.resultsByTag(try await Self.replay(try Self.seed("rst-refused-and-internal")))
        #expect(resets[1].map { if case .failure(.refused) = $0 { true } else { false } } == true)
        #expect(resets[2].map { if case .failure(.reset(code: 2)) = $0 { true } else { false } } == true)
        #expect((try? resets[3]?.get())?.status == 200)

        let goAway = Self.resultsByTag(try await Self.replay(try Self.seed("goaway-no-error-last-1")))
        #expect((try? goAway[1]?.get())?.status == 200)
        for tag: UInt64 in [2, 3] {
            #expect(goAway[tag].map { if case .failure(.refused) = $0 { true } else { false } } == true)
        }
    }

    /// As the APNs pool does, a request submitted from inside the callback that finished a
    /// stream goes out on the same connection, and finishes once too.
    @Test func requestsSubmittedWhileStreamsFinishAreAnsweredOrLost() async throws {
        let loop = try EventLoop(name: "replay")
        defer { loop.shutdown() }
        let tls = try TLSClientContext(TLSClientConfiguration())
        let bytes = try Self.seed("200-each-stream")
        let outcome = try await onLoop(loop) {
            Result { try HTTP2ResponseReplay.run(serverBytes: bytes, streams: 3, resubmissions: 3, loop: loop, tls: tls) }
        }.get()
        #expect(outcome.submittedTags == [1, 2, 3, 4, 5, 6])
        #expect(outcome.results.map(\.tag).sorted() == [1, 2, 3, 4, 5, 6])
        for (tag, result) in outcome.results {
            switch result {
            case .success(let response): #expect(tag <= 3 && response.status == 200)
            case .failure(.connectionLost): #expect(tag > 3)
            case .failure(let failure): Issue.record("tag \(tag): \(failure)")
            }
        }
    }

    @Test func everySeedFinishesEveryStreamOnce() async throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path).sorted()
        #expect(names.count >= 10)
        for name in names {
            _ = Self.resultsByTag(try await Self.replay(try Self.seed(name)))
        }
    }
}
