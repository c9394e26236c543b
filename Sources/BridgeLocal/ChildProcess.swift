#if canImport(Glibc)
import Glibc
#endif
import Observability

/// A child process started with `posix_spawn` and reaped with `wait4`, so that the benchmark
/// gets the child's own CPU time (`ru_utime` + `ru_stime`) from the kernel: h2load and the
/// `apns-bridge run` instances under test. Not its peak RSS: `wait4`'s `ru_maxrss` of a child
/// started this way includes the parent's high-water mark (the child runs in the parent's
/// memory until it execs, and Linux keeps the peak of the memory an exec leaves), so memory
/// is read from the child's `/proc/<pid>/status` while it runs (`ProcessCPUTimes.sample(pid:)`).
///
/// Only this type waits for the pid; nothing else in the process may reap it.
public final class ChildProcess: @unchecked Sendable {
    /// How the child ended and what it used, from `wait4`.
    public struct Exit: Sendable {
        /// The exit status, or 128 + the signal number when a signal ended it.
        public var status: Int32
        /// User + system CPU seconds of the child (all its threads, its whole life).
        public var cpuSeconds: Double
    }

    /// The child could not be started.
    public struct SpawnError: Error, CustomStringConvertible {
        /// What failed.
        public var description: String
    }

    /// The child's process id.
    public let pid: pid_t
    private let exitState = Locked<Exit?>(nil)

    /// Starts `executable` (found on `PATH` when it has no `/`) with `arguments` and this
    /// process's environment plus `environment`;
    /// standard output goes to `outputFile` (truncated) or /dev/null, standard error to
    /// `errorFile` or /dev/null, standard input is /dev/null. No other descriptor of this
    /// process reaches the child (librdkafka's pipes and the mock brokers' sockets are not
    /// close-on-exec).
    /// - Throws: `SpawnError` when `posix_spawn` fails.
    public init(executable: String, arguments: [String], environment: [String: String] = [:],
                outputFile: String? = nil, errorFile: String? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputFile ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errorFile ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if let closeFrom = Self.closeFrom {
            let failure = closeFrom(&actions, 3)
            guard failure == 0 else {
                throw SpawnError(description: "cannot start \(executable): \(String(cString: strerror(failure)))")
            }
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        var inherited: [UnsafeMutablePointer<CChar>?] = []
        var entry = environ
        while let variable = entry.pointee {
            let name = String(cString: variable).prefix { $0 != "=" }
            if environment[String(name)] == nil { inherited.append(strdup(variable)) }
            entry += 1
        }
        let envp = inherited + environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        // The child starts with no signal blocked and the ones that stop a process at their
        // defaults, whatever the spawning thread blocks (a test's or a dispatch thread blocks
        // nearly all of them): a blocked mask carries over exec, and SIGTERM would not stop the
        // child. glibc's posix_spawnattr_* calls fail only on invalid arguments, which these are
        // not, so their results are not checked.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for stopping in [SIGTERM, SIGINT, SIGHUP, SIGQUIT] { sigaddset(&defaults, stopping) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let result = posix_spawnp(&child, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw SpawnError(description: "cannot start \(executable): \(String(cString: strerror(result)))")
        }
        pid = child
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which closes every
    /// descriptor from a number on in the child, between fork and exec, whichever thread opened
    /// it. Looked up at run time: Swift's Glibc module leaves out spawn.h's GNU extensions. Nil
    /// on an older C library, where children inherit what is not close-on-exec.
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// Sends `signal` to the child (nothing once it was reaped).
    public func send(_ signal: Int32) {
        guard exitState.withLock({ $0 }) == nil else { return }
        kill(pid, signal)
    }

    /// Whether the child is still running (reaps it when it ended).
    public var isRunning: Bool {
        poll(blocking: false) == nil
    }

    /// Waits until the child ended, at most `timeoutSeconds` (then it is killed with SIGKILL).
    @discardableResult
    public func wait(timeoutSeconds: Double) -> Exit {
        let deadline = Timestamp.monotonicNanoseconds() + UInt64(max(timeoutSeconds, 0) * 1e9)
        while Timestamp.monotonicNanoseconds() < deadline {
            if let exit = poll(blocking: false) { return exit }
            usleep(5_000)
        }
        send(SIGKILL)
        // invariant: after SIGKILL a blocking wait4 returns.
        return poll(blocking: true)!
    }

    private func poll(blocking: Bool) -> Exit? {
        exitState.withLock { state in
            if let state { return state }
            var status: Int32 = 0
            var usage = rusage()
            let reaped = wait4(pid, &status, blocking ? 0 : WNOHANG, &usage)
            guard reaped == pid else {
                // ECHILD: not ours to wait for any more; report it as gone.
                if reaped < 0 && errno == ECHILD { state = Exit(status: -1, cpuSeconds: 0) }
                return state
            }
            let signal = status & 0x7f
            state = Exit(
                status: signal == 0 ? (status >> 8) & 0xff : 128 + signal,
                cpuSeconds: Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
                    + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6)
            return state
        }
    }

    deinit {
        if exitState.withLock({ $0 }) == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}
