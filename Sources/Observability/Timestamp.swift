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

    /// Milliseconds since the Unix epoch as of the kernel's last tick (`CLOCK_REALTIME_COARSE`):
    /// at most a tick (1-10 ms) old, for a quarter of `nowMilliseconds`' cost. For checks that
    /// count in seconds or more, per record.
    public static func coarseNowMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &ts)
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

    /// Appends `2026-11-29T23:59:59.123Z` for a millisecond Unix time
    /// (``ByteWriter/writeISO8601(_:)``).
    public static func appendISO8601(_ milliseconds: Int64, to output: inout [UInt8]) {
        output.appendWriting(maxBytes: ByteWriter.iso8601MaxBytes) { $0.writeISO8601(milliseconds) }
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
}

extension ByteWriter {
    /// The most bytes `writeISO8601` writes: a nine-digit year (the range of `Int64`
    /// milliseconds) and the 20 characters after it.
    public static let iso8601MaxBytes = 32

    /// `2026-11-29T23:59:59.123Z` for a millisecond Unix time, without building strings (it runs
    /// once per published result): the calendar date by arithmetic (proleptic Gregorian, as
    /// `gmtime_r`, which takes glibc's time zone lock on every call).
    public mutating func writeISO8601(_ milliseconds: Int64) {
        let millis = Int(((milliseconds % 1000) + 1000) % 1000)
        // Floor division, without the subtraction that would overflow near Int64.min.
        let seconds = milliseconds / 1000 - (milliseconds < 0 && millis != 0 ? 1 : 0)
        var days = seconds / 86_400
        var secondOfDay = Int(seconds % 86_400)
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let date = Timestamp.civilDate(daysSinceEpoch: days)
        if date.year >= 0 && date.year <= 9999 {
            writeFixedISO8601(year: Int(date.year), month: date.month, day: date.day, secondOfDay: secondOfDay, millis: millis)
            return
        }
        writeDigits(Int(clamping: date.year), width: 4)
        writeDigits(date.month, width: 2, prefix: UInt8(ascii: "-"))
        writeDigits(date.day, width: 2, prefix: UInt8(ascii: "-"))
        writeDigits(secondOfDay / 3600, width: 2, prefix: UInt8(ascii: "T"))
        writeDigits(secondOfDay / 60 % 60, width: 2, prefix: UInt8(ascii: ":"))
        writeDigits(secondOfDay % 60, width: 2, prefix: UInt8(ascii: ":"))
        writeDigits(millis, width: 3, prefix: UInt8(ascii: "."))
        write(UInt8(ascii: "Z"))
    }

    /// The 24 bytes of a date in years 0–9999 (every real one), filled two digits at a time and
    /// copied once; the digit loops below handle the rest of the `Int64` range.
    private mutating func writeFixedISO8601(year: Int, month: Int, day: Int, secondOfDay: Int, millis: Int) {
        guard let target = reserve(24) else { return }
        @inline(__always) func pair(_ value: Int, at offset: Int) {
            target[offset] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value / 10)
            target[offset + 1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10)
        }
        pair(year / 100, at: 0)
        pair(year % 100, at: 2)
        target[4] = UInt8(ascii: "-")
        pair(month, at: 5)
        target[7] = UInt8(ascii: "-")
        pair(day, at: 8)
        target[10] = UInt8(ascii: "T")
        pair(secondOfDay / 3600, at: 11)
        target[13] = UInt8(ascii: ":")
        pair(secondOfDay / 60 % 60, at: 14)
        target[16] = UInt8(ascii: ":")
        pair(secondOfDay % 60, at: 17)
        target[19] = UInt8(ascii: ".")
        target[20] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: millis / 100)
        pair(millis % 100, at: 21)
        target[23] = UInt8(ascii: "Z")
    }

    /// Writes `prefix` (if any), then a non-negative number with leading zeros to at least
    /// `width` digits.
    private mutating func writeDigits(_ value: Int, width: Int, prefix: UInt8? = nil) {
        if let prefix { write(prefix) }
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = max(0, value)
        while divisor <= rest / 10 { divisor *= 10 }
        while divisor > 0 {
            write(UInt8(ascii: "0") &+ UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}
