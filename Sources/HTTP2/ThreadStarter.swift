#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2

/// Starting plain POSIX threads without Foundation.
public enum ThreadStarter {
    /// Holds the body while the new thread starts.
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts a thread named `name` (truncated to 15 bytes, the kernel's limit) that runs `body`.
    ///
    /// - Parameters:
    ///   - detached: detach the thread (nobody will join it).
    ///   - stackBytes: the thread's stack size; nil: the system's default (tests give a loop a
    ///     small one to prove a path does not nest calls per request).
    /// - Returns: the thread, for `pthread_join` when not detached.
    /// - Throws: ``HTTP2Error`` when the thread cannot be created.
    @discardableResult
    public static func start(name: String, detached: Bool, stackBytes: Int? = nil,
                             _ body: @escaping @Sendable () -> Void) throws -> pthread_t {
        let shortName = String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self)
        let box = Unmanaged.passRetained(Body {
            _ = apns_set_current_thread_name(shortName)
            body()
        }).toOpaque()
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackBytes {
            pthread_attr_setstacksize(&attributes, max(stackBytes, Int(PTHREAD_STACK_MIN)))
        }
        let result = pthread_create(&thread, &attributes, { argument in
            // invariant: pthread_create passes the pointer given below, which is never nil.
            let body = Unmanaged<Body>.fromOpaque(argument!).takeRetainedValue()
            body.run()
            return nil
        }, box)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            throw HTTP2Error.system("pthread_create", errno: result)
        }
        if detached { pthread_detach(thread) }
        return thread
    }
}
