import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Runs a handler once when SIGTERM or SIGINT arrives (the default actions are disabled).
final class SignalWaiter: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []

    /// Installs the handler; keep the waiter alive as long as it should listen.
    init(_ handler: @escaping @Sendable (Int32) -> Void) {
        for signalNumber in [SIGTERM, SIGINT] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { handler(signalNumber) }
            source.resume()
            sources.append(source)
        }
    }
}
