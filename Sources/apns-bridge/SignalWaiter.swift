import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Calls a handler for every SIGTERM or SIGINT (their default actions are disabled), with how
/// many such signals have arrived so far, counting this one.
final class SignalWaiter: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let counter = SignalCounter()

    private final class SignalCounter: Sendable {
        let received = Atomic<Int>(0)
    }

    /// Installs the handler; keep the waiter alive as long as it should listen.
    init(_ handler: @escaping @Sendable (_ signal: Int32, _ count: Int) -> Void) {
        for signalNumber in [SIGTERM, SIGINT] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            let counter = self.counter
            source.setEventHandler {
                handler(signalNumber, counter.received.add(1, ordering: .relaxed).newValue)
            }
            source.resume()
            sources.append(source)
        }
    }
}
