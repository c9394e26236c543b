#if canImport(Glibc)
import Glibc
#endif

/// A point in time as the pool's state machines see it: a monotonic reading for timers and
/// backoff, and the wall clock for notification `expiration` (Unix seconds on the wire).
///
/// State machines never read a clock: every event carries an `APNsInstant`, so tests drive them
/// through hours of simulated time in microseconds.
public struct APNsInstant: Sendable, Equatable {
    /// Monotonic nanoseconds (arbitrary origin).
    public var nanoseconds: Int64
    /// Wall clock, milliseconds since the Unix epoch (`APNsSystemClock`: to the kernel's tick).
    public var unixMilliseconds: Int64

    /// Creates an instant from its two readings.
    public init(nanoseconds: Int64, unixMilliseconds: Int64) {
        self.nanoseconds = nanoseconds
        self.unixMilliseconds = unixMilliseconds
    }

    /// Both readings moved by `duration`.
    public func advanced(by duration: Duration) -> APNsInstant {
        let delta = duration.nanosecondsClamped
        return APNsInstant(nanoseconds: nanoseconds &+ delta, unixMilliseconds: unixMilliseconds &+ delta / 1_000_000)
    }

    /// Wall-clock seconds, the unit of `apns-expiration`.
    public var unixSeconds: Int64 { unixMilliseconds / 1000 }
}

/// Where the pool reads the time: the system clocks in production, a manual clock in tests.
public protocol APNsClock: Sendable {
    /// The current instant.
    func now() -> APNsInstant
}

/// `CLOCK_MONOTONIC`, and the wall clock as of the kernel's last tick (`CLOCK_REALTIME_COARSE`):
/// the pool reads the wall clock only for `apns-expiration`, in seconds, and the coarse clock
/// costs a quarter of the precise one (the pool reads it for every answer).
public struct APNsSystemClock: APNsClock {
    /// Creates the system clock.
    public init() {}

    /// Reads both system clocks.
    public func now() -> APNsInstant {
        var monotonic = timespec()
        clock_gettime(CLOCK_MONOTONIC, &monotonic)
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &wall)
        return APNsInstant(
            nanoseconds: Int64(monotonic.tv_sec) &* 1_000_000_000 &+ Int64(monotonic.tv_nsec),
            unixMilliseconds: Int64(wall.tv_sec) &* 1000 &+ Int64(wall.tv_nsec) / 1_000_000
        )
    }
}

/// The source of jitter: uniform values in `0..<1`. Injected so tests can pin the extremes.
public struct APNsJitterSource: Sendable {
    /// Returns the next uniform value in `0..<1`.
    public let unit: @Sendable () -> Double

    /// Wraps a function returning values in `0..<1` (clamped when it does not).
    public init(_ unit: @escaping @Sendable () -> Double) {
        self.unit = unit
    }

    /// The system's random number generator.
    public static let system = APNsJitterSource { Double.random(in: 0..<1) }

    /// A value in `0..<1`, whatever the wrapped function returns.
    func next() -> Double {
        let value = unit()
        return value.isNaN ? 0 : min(max(value, 0), 0.999_999_999)
    }
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int64`.
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        if seconds >= Int64.max / 1_000_000_000 { return .max }
        if seconds <= Int64.min / 1_000_000_000 { return .min }
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
