#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a `pthread_mutex_t`: the project's one lock type.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer understands pthread mutexes
/// (it does not see `Mutex`'s futex-based locking on this toolchain and reports the guarded
/// accesses as races), so what TSan reports in this project is real. Hold it briefly: never
/// across a call that can block (I/O, a full librdkafka queue, waiting for another thread).
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// No runtime exclusivity check: the mutex already makes every access exclusive (a nested
    /// `withLock` on one thread would deadlock before it could overlap).
    @exclusivity(unchecked) private var value: Value

    /// Creates the lock around `value`.
    public init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        // invariant: pthread_mutex_init with default attributes cannot fail on Linux.
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
