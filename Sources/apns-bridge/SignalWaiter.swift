import HTTP2
#if canImport(Glibc)
import Glibc
#endif

/// Calls a handler for every SIGTERM or SIGINT, with how many such signals have arrived so far,
/// counting this one.
///
/// The two signals are blocked in every thread (``blockStopSignals()``, called before the
/// process starts any) and taken by the waiter's own thread with `sigwait`. A signal that
/// arrives before the waiter exists, or while it starts, stays pending until the waiter takes
/// it: it is never lost, and never ends the process with the signal's default action. (Ignoring
/// the signals and letting a dispatch source catch them loses any that arrive before the source
/// is registered, which happens asynchronously.)
final class SignalWaiter: Sendable {
    private static let stopSignals = [SIGTERM, SIGINT]

    /// Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it starts later.
    /// Call it first thing in a command that creates a waiter, before any thread exists: a thread
    /// started earlier would keep the default action.
    static func blockStopSignals() {
        var set = signalSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Starts the waiting thread. It lives as long as the process; `handler` runs on it.
    /// - Throws: when the thread cannot be started.
    init(_ handler: @escaping @Sendable (_ signal: Int32, _ count: Int) -> Void) throws {
        try ThreadStarter.start(name: "signals", detached: true) {
            var set = Self.signalSet()
            var received = 0
            while true {
                var signalNumber: Int32 = 0
                guard sigwait(&set, &signalNumber) == 0 else { continue }
                received += 1
                handler(signalNumber, received)
            }
        }
    }

    private static func signalSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signalNumber in stopSignals { sigaddset(&set, signalNumber) }
        return set
    }
}
