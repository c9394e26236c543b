import HTTP2
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Loop-only methods check their thread: called from another one, they stop the process rather
/// than race the loop inside nghttp2 or the socket's state. Each case runs in a child process
/// whose setup, if it failed, would exit 0 and fail the test.
@Suite struct LoopConfinementTests {
    /// A connection on a loop of its own, never connected; exits 0 if either cannot be made.
    static func unconnectedConnection() -> HTTP2ClientConnection {
        guard let loop = try? EventLoop(name: "confined"),
              let tls = try? TLSClientContext(TLSClientConfiguration()) else { exit(0) }
        return HTTP2ClientConnection(host: "127.0.0.1", port: 9, tls: tls, loop: loop,
                                     delegate: RecordingDelegate(), streamTimeoutNanoseconds: 1_000_000_000)
    }

    @Test func closingAConnectionOffItsLoopStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            LoopConfinementTests.unconnectedConnection().close()
            exit(0)
        }
    }

    @Test func submittingOffTheLoopStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            _ = LoopConfinementTests.unconnectedConnection().submit(HTTP2Request(path: "/3/device/x", headers: [], body: []), tag: 1)
            exit(0)
        }
    }

    @Test func unregisteringADescriptorOffTheLoopStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            guard let loop = try? EventLoop(name: "confined") else { exit(0) }
            loop.unregister(fd: 0)
            exit(0)
        }
    }
}
