import APNs
import Dispatch
import FuzzSupport
import HTTP2

/// Arbitrary bytes from the server, fed to a client HTTP/2 session after a valid handshake with
/// three requests open and up to three more submitted as streams finish (HTTP2ResponseReplay),
/// then each complete response parsed as an APNs answer. Checks what the bridge relies on: every stream finishes exactly once and the
/// connection reports its close.
@main
enum HTTP2ResponseFuzzer {
    static func main() throws {
        let loop = try EventLoop(name: "fuzz-http2")
        let tls = try TLSClientContext(TLSClientConfiguration())
        runFuzzer { bytes in
            let done = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var outcome: HTTP2ResponseReplay.Outcome?
            loop.execute {
                // invariant: building a client session only fails when nghttp2 is out of memory.
                outcome = try! HTTP2ResponseReplay.run(serverBytes: bytes, streams: 3, resubmissions: 3, loop: loop, tls: tls)
                done.signal()
            }
            done.wait()
            // invariant: the loop task above always sets it before signalling.
            check(outcome!)
        }
    }

    static func check(_ outcome: HTTP2ResponseReplay.Outcome) {
        precondition(outcome.wasReady, "the handshake did not make the connection ready")
        precondition(outcome.submittedTags.prefix(3) == [1, 2, 3], "the requests were not submitted")
        let finished = outcome.results.map(\.tag).sorted()
        precondition(finished == outcome.submittedTags, "streams finished \(finished), submitted \(outcome.submittedTags)")
        precondition(outcome.closeReason != nil, "the connection did not report its close")
        for case (_, .success(let response)) in outcome.results {
            let answer = APNsResponse(response)
            precondition(answer.status == response.status)
        }
    }
}
