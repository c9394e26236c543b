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
    /// (it runs once per published result): the calendar date by arithmetic (proleptic
    /// Gregorian, as `gmtime_r`, which takes glibc's time zone lock on every call).
    public static func appendISO8601(_ milliseconds: Int64, to output: inout [UInt8]) {
        let millis = Int(((milliseconds % 1000) + 1000) % 1000)
        let seconds = (milliseconds - Int64(millis)) / 1000
        var days = seconds / 86_400
        var secondOfDay = Int(seconds % 86_400)
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let date = civilDate(daysSinceEpoch: days)
        appendDigits(Int(clamping: date.year), width: 4, to: &output)
        appendDigits(date.month, width: 2, prefix: UInt8(ascii: "-"), to: &output)
        appendDigits(date.day, width: 2, prefix: UInt8(ascii: "-"), to: &output)
        appendDigits(secondOfDay / 3600, width: 2, prefix: UInt8(ascii: "T"), to: &output)
        appendDigits(secondOfDay / 60 % 60, width: 2, prefix: UInt8(ascii: ":"), to: &output)
        appendDigits(secondOfDay % 60, width: 2, prefix: UInt8(ascii: ":"), to: &output)
        appendDigits(millis, width: 3, prefix: UInt8(ascii: "."), to: &output)
        output.append(UInt8(ascii: "Z"))
    }

    /// Year, month (1–12) and day (1–31) of a day count from 1970-01-01 (H. Hinnant's
    /// `civil_from_days`: 400-year eras of 146,097 days, years starting on March 1st).
    static func civilDate(daysSinceEpoch: Int64) -> (year: Int64, month: Int, day: Int) {
        let shifted = daysSinceEpoch + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * monthFromMarch + 2) / 5 + 1)
        let month = Int(monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Appends `prefix` (if any), then a non-negative number with leading zeros to at least
    /// `width` digits.
    private static func appendDigits(_ value: Int, width: Int, prefix: UInt8? = nil, to output: inout [UInt8]) {
        if let prefix { output.append(prefix) }
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
