import JSON
import APNs
import Observability

/// Writes the JSON values of output records (contract §3, §4, §5) by appending bytes to a
/// caller-owned, reusable buffer. No Foundation; strings are escaped with `JSONText.appendQuoted`.
public enum ResultRecordEncoder {
    /// Appends a result record (contract §3).
    public static func appendResult(_ result: PushResult, to buffer: inout [UInt8]) {
        append("{\"request_id\":", to: &buffer)
        JSONText.appendQuoted(result.requestID, to: &buffer)
        append(",\"app\":", to: &buffer)
        JSONText.appendQuoted(result.app, to: &buffer)
        append(",\"token\":", to: &buffer)
        JSONText.appendQuoted(result.token, to: &buffer)
        append(",\"outcome\":\"", to: &buffer)
        buffer.append(contentsOf: result.outcome.rawValue.utf8)
        append("\",\"status\":", to: &buffer)
        appendOptionalInteger(result.status.map(Int64.init), to: &buffer)
        append(",\"reason\":", to: &buffer)
        appendOptionalString(result.reason, to: &buffer)
        append(",\"apns_id\":", to: &buffer)
        appendOptionalString(result.apnsID, to: &buffer)
        append(",\"apns_unique_id\":", to: &buffer)
        appendOptionalString(result.apnsUniqueID, to: &buffer)
        append(",\"unregistered_at\":", to: &buffer)
        appendOptionalInteger(result.unregisteredAt, to: &buffer)
        append(",\"attempts\":", to: &buffer)
        appendInteger(Int64(result.attempts), to: &buffer)
        append(",\"latency_ms\":", to: &buffer)
        if let latency = result.latencyMilliseconds {
            appendOneDecimal(latency, to: &buffer)
        } else {
            append("null", to: &buffer)
        }
        append(",\"source\":", to: &buffer)
        appendSource(result.source, to: &buffer)
        append(",\"completed_at\":\"", to: &buffer)
        Timestamp.appendISO8601(result.completedAtMilliseconds, to: &buffer)
        append("\"}", to: &buffer)
    }

    /// Appends an invalid-token record (contract §4).
    public static func appendInvalidToken(_ record: InvalidTokenRecord, to buffer: inout [UInt8]) {
        append("{\"token\":", to: &buffer)
        JSONText.appendQuoted(record.token, to: &buffer)
        append(",\"app\":", to: &buffer)
        JSONText.appendQuoted(record.app, to: &buffer)
        append(",\"topic\":", to: &buffer)
        JSONText.appendQuoted(record.topic, to: &buffer)
        append(",\"environment\":\"", to: &buffer)
        buffer.append(contentsOf: record.environment.rawValue.utf8)
        append("\",\"reason\":", to: &buffer)
        JSONText.appendQuoted(record.reason, to: &buffer)
        append(",\"unregistered_at\":", to: &buffer)
        appendOptionalInteger(record.unregisteredAt, to: &buffer)
        append(",\"request_id\":", to: &buffer)
        JSONText.appendQuoted(record.requestID, to: &buffer)
        append(",\"observed_at\":\"", to: &buffer)
        Timestamp.appendISO8601(record.observedAtMilliseconds, to: &buffer)
        append("\"}", to: &buffer)
    }

    // MARK: Pieces

    static func appendSource(_ source: RecordSource, to buffer: inout [UInt8]) {
        append("{\"topic\":", to: &buffer)
        JSONText.appendQuoted(source.topic, to: &buffer)
        append(",\"partition\":", to: &buffer)
        appendInteger(Int64(source.partition), to: &buffer)
        append(",\"offset\":", to: &buffer)
        appendInteger(source.offset, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
    }

    @inline(__always)
    static func append(_ text: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    static func appendOptionalString(_ value: String?, to buffer: inout [UInt8]) {
        if let value {
            JSONText.appendQuoted(value, to: &buffer)
        } else {
            append("null", to: &buffer)
        }
    }

    static func appendOptionalInteger(_ value: Int64?, to buffer: inout [UInt8]) {
        if let value {
            appendInteger(value, to: &buffer)
        } else {
            append("null", to: &buffer)
        }
    }

    /// Decimal digits of `value` (Int64.min included).
    static func appendInteger(_ value: Int64, to buffer: inout [UInt8]) {
        if value < 0 { buffer.append(UInt8(ascii: "-")) }
        appendUnsigned(value.magnitude, to: &buffer)
    }

    /// Decimal digits of `value`, written right to left on the stack and appended in one copy.
    static func appendUnsigned(_ value: UInt64, to buffer: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt64.max has 20 digits
        withUnsafeMutableBytes(of: &digits) { bytes in
            var start = bytes.count
            var rest = value
            repeat {
                start -= 1
                bytes[start] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...]))
        }
    }

    /// `value` rounded to one decimal place, always written with that decimal (`18.4`, `0.0`);
    /// non-finite values are written `0.0`.
    static func appendOneDecimal(_ value: Double, to buffer: inout [UInt8]) {
        let scaled = (value * 10).rounded()
        guard scaled.isFinite, abs(scaled) < 9.0e17 else {
            append("0.0", to: &buffer)
            return
        }
        let tenths = Int64(scaled)
        if tenths < 0 { buffer.append(UInt8(ascii: "-")) }
        let magnitude = tenths.magnitude
        appendUnsigned(magnitude / 10, to: &buffer)
        buffer.append(UInt8(ascii: "."))
        buffer.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
    }
}

/// Standard base64 (RFC 4648, with padding).
enum Base64 {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func append(_ bytes: [UInt8], to buffer: inout [UInt8]) {
        buffer.reserveCapacity(buffer.count + (bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { buffer.append(alphabet[Int(chunk >> UInt32(shift) & 0x3F)]) }
            index += 3
        }
        let remaining = bytes.count - index
        if remaining == 1 {
            let chunk = UInt32(bytes[index]) << 16
            buffer.append(alphabet[Int(chunk >> 18 & 0x3F)])
            buffer.append(alphabet[Int(chunk >> 12 & 0x3F)])
            buffer.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")])
        } else if remaining == 2 {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            buffer.append(alphabet[Int(chunk >> 18 & 0x3F)])
            buffer.append(alphabet[Int(chunk >> 12 & 0x3F)])
            buffer.append(alphabet[Int(chunk >> 6 & 0x3F)])
            buffer.append(UInt8(ascii: "="))
        }
    }
}
