#if canImport(Glibc)
import Glibc
#endif

/// A joinable OS thread running one closure (librdkafka poll loops block in C, so they get a
/// thread of their own instead of a Swift concurrency executor).
final class NativeThread: @unchecked Sendable {
    /// Starts a thread running a closure: `NativeThread.init`, or in tests one that fails.
    typealias Starter = (_ name: String, _ body: @escaping @Sendable () -> Void) throws -> NativeThread

    private var thread = pthread_t()
    private var isJoined = false

    /// Starts `body` on a new thread; `name` appears in errors.
    init(name: String, _ body: @escaping @Sendable () -> Void) throws {
        let box = Unmanaged.passRetained(ThreadBody(body: body))
        let result = pthread_create(&thread, nil, { argument in
            // invariant: the argument is the retained ThreadBody passed below.
            let body = Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue()
            body.body()
            return nil
        }, box.toOpaque())
        guard result == 0 else {
            box.release()
            throw KafkaError(code: KafkaError.Code.invalidArgument, message: "could not start thread \(name): errno \(result)")
        }
    }

    /// Lets the thread end on its own, never joined.
    func detach() {
        guard !isJoined else { return }
        isJoined = true
        pthread_detach(thread)
    }

    /// Waits for the thread to end. Call once, from another thread.
    func join() {
        guard !isJoined else { return }
        isJoined = true
        pthread_join(thread, nil)
    }
}

private final class ThreadBody {
    let body: @Sendable () -> Void

    init(body: @escaping @Sendable () -> Void) {
        self.body = body
    }
}
