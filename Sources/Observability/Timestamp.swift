#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock and monotonic time helpers that avoid Foundation on hot paths.
public enum Timestamp {
    /// Milliseconds since the Unix epoch (wall clock).
    public static func nowMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Microseconds since the Unix epoch (wall clock).
    public static func nowMicroseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    /// Nanoseconds of a monotonic clock, for deadlines and durations.
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// `2026-11-29T23:59:59.123Z` for a millisecond Unix time.
    public static func iso8601(_ milliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendISO8601(milliseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `2026-11-29T23:59:59.123Z` for a millisecond Unix time, without building strings
    /// (it runs once per published result).
    public static func appendISO8601(_ milliseconds: Int64, to output: inout [UInt8]) {
        let millis = Int(((milliseconds % 1000) + 1000) % 1000)
        var seconds = time_t((milliseconds - Int64(millis)) / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        appendDigits(Int(parts.tm_year) + 1900, width: 4, to: &output)
        output.append(UInt8(ascii: "-"))
        appendDigits(Int(parts.tm_mon) + 1, width: 2, to: &output)
        output.append(UInt8(ascii: "-"))
        appendDigits(Int(parts.tm_mday), width: 2, to: &output)
        output.append(UInt8(ascii: "T"))
        appendDigits(Int(parts.tm_hour), width: 2, to: &output)
        output.append(UInt8(ascii: ":"))
        appendDigits(Int(parts.tm_min), width: 2, to: &output)
        output.append(UInt8(ascii: ":"))
        appendDigits(Int(parts.tm_sec), width: 2, to: &output)
        output.append(UInt8(ascii: "."))
        appendDigits(millis, width: 3, to: &output)
        output.append(UInt8(ascii: "Z"))
    }

    /// Appends a non-negative number with leading zeros to at least `width` digits.
    private static func appendDigits(_ value: Int, width: Int, to output: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = max(0, value)
        while divisor <= rest / 10 { divisor *= 10 }
        while divisor > 0 {
            output.append(UInt8(ascii: "0") &+ UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}
