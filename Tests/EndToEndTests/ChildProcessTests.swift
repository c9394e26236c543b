#if canImport(Glibc)
import Glibc
#endif
import BridgeLocal
import Foundation
import Testing
import TestSupport

/// `ChildProcess`, which starts h2load and the `apns-bridge run` instances of the bench.
@Suite(.serialized)
struct ChildProcessTests {
    /// A child must stop on SIGTERM whichever thread starts it: a blocked mask and ignored
    /// signals carry over exec.
    @Test func aChildStartsWithNoSignalBlockedAndTheStoppingOnesAtTheirDefaults() throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        var previousMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previousMask)
        let previousHangUp = signal(SIGHUP, SIG_IGN)
        let child: ChildProcess
        do {
            // Restored as soon as the child exists: the rest of the test process keeps its own.
            defer {
                pthread_sigmask(SIG_SETMASK, &previousMask, nil)
                signal(SIGHUP, previousHangUp)
            }
            child = try ChildProcess(executable: "sleep", arguments: ["30"])
        }
        let status = try String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8)
        #expect(Self.mask("SigBlk", in: status) == 0)
        let ignored = try #require(Self.mask("SigIgn", in: status))
        #expect(ignored & (1 << UInt64(SIGTERM - 1)) == 0 && ignored & (1 << UInt64(SIGHUP - 1)) == 0)
        child.send(SIGTERM)
        #expect(child.wait(timeoutSeconds: 10).status == 128 + SIGTERM)
    }

    /// Nothing but standard input, output and error reaches a child: the benchmark process holds
    /// librdkafka's pipes and the mock brokers' sockets, which are not close-on-exec.
    @Test func aChildInheritsOnlyItsStandardDescriptors() throws {
        let inheritable = open("/dev/null", O_RDONLY)  // no O_CLOEXEC: as librdkafka opens its pipes
        try #require(inheritable >= 0)
        defer { close(inheritable) }
        let child = try ChildProcess(executable: "sleep", arguments: ["30"])
        defer {
            child.send(SIGTERM)
            child.wait(timeoutSeconds: 10)
        }
        // posix_spawn returns once the child has exec'd, but its dynamic loader and locale set-up
        // briefly open files (on 3) as `sleep` starts: an inherited descriptor would stay, those
        // close, so the table is waited for rather than read once.
        var descriptors: [String] = []
        let onlyStandard = waitFor(timeout: .seconds(10)) {
            descriptors = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/fd")) ?? []).sorted()
            return descriptors == ["0", "1", "2"]
        }
        #expect(onlyStandard, "\(descriptors)")
    }

    /// The hexadecimal signal mask of the line `name:` of a `/proc/<pid>/status`.
    static func mask(_ name: String, in status: String) -> UInt64? {
        status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            .flatMap { UInt64($0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces), radix: 16) }
    }
}
