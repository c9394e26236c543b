import JSON
import APNs
import Observability

/// Writes the JSON values of output records (contract §3, §4, §5) by appending bytes to a
/// caller-owned, reusable buffer. No Foundation; strings are escaped with `JSONText.appendQuoted`.
public enum ResultRecordEncoder {
    /// Room for a record's literals, integers and timestamp: its strings are counted apart.
    static let fixedPartMaxBytes = 512

    /// Appends a result record (contract §3).
    public static func appendResult(_ result: PushResult, to buffer: inout [UInt8]) {
        withResult(result) { buffer.append(contentsOf: $0) }
    }

    /// Writes a result record (contract §3) into scratch memory and hands it to `use`.
    public static func withResult(_ result: PushResult, _ use: (UnsafeBufferPointer<UInt8>) -> Void) {
        // Nearly every result fits the first attempt's stack scratch; only a longer one pays for
        // the exact string lengths, which keep its whole bound on the stack too.
        ByteWriter.withWritten(trying: { writer in
            writer.write("{\"request_id\":")
            writer.writeQuoted(result.requestID)
            writer.write(",\"app\":")
            writer.writeQuoted(result.app)
            writer.write(",\"token\":")
            writer.writeQuoted(result.token)
            writer.write(",\"outcome\":\"")
            writer.write(result.outcome.literal)
            writer.write("\",\"status\":")
            writer.writeOptionalInteger(result.status.map(Int64.init))
            writer.write(",\"reason\":")
            writer.writeOptionalQuoted(result.reason)
            writer.write(",\"apns_id\":")
            writer.writeOptionalQuoted(result.apnsID)
            writer.write(",\"apns_unique_id\":")
            writer.writeOptionalQuoted(result.apnsUniqueID)
            writer.write(",\"unregistered_at\":")
            writer.writeOptionalInteger(result.unregisteredAt)
            writer.write(",\"attempts\":")
            writer.writeInteger(Int64(result.attempts))
            writer.write(",\"latency_ms\":")
            if let latency = result.latencyMilliseconds {
                writer.writeOneDecimal(latency)
            } else {
                writer.write("null")
            }
            writer.write(",\"source\":")
            writer.writeSource(result.source)
            writer.write(",\"completed_at\":\"")
            writer.writeISO8601(result.completedAtMilliseconds)
            writer.write("\"}")
        }, maxBytes: { maxBytes(of: result) }, use: use)
    }

    /// The most bytes a result record takes: the fixed part and its strings' exact quoted lengths.
    static func maxBytes(of result: PushResult) -> Int {
        fixedPartMaxBytes + ByteWriter.quotedBytes(result.requestID) + ByteWriter.quotedBytes(result.app)
            + ByteWriter.quotedBytes(result.token) + ByteWriter.quotedBytes(result.source.topic)
            + (result.reason.map(ByteWriter.quotedBytes) ?? 0) + (result.apnsID.map(ByteWriter.quotedBytes) ?? 0)
            + (result.apnsUniqueID.map(ByteWriter.quotedBytes) ?? 0)
    }

    /// Appends an invalid-token record (contract §4).
    public static func appendInvalidToken(_ record: InvalidTokenRecord, to buffer: inout [UInt8]) {
        let strings = [record.token, record.app, record.topic, record.reason, record.requestID]
            .reduce(0) { $0 + ByteWriter.quotedBytes($1) }
        buffer.appendWriting(maxBytes: fixedPartMaxBytes + strings) { writer in
            writer.write("{\"token\":")
            writer.writeQuoted(record.token)
            writer.write(",\"app\":")
            writer.writeQuoted(record.app)
            writer.write(",\"topic\":")
            writer.writeQuoted(record.topic)
            writer.write(",\"environment\":\"")
            writer.write(record.environment.literal)
            writer.write("\",\"reason\":")
            writer.writeQuoted(record.reason)
            writer.write(",\"unregistered_at\":")
            writer.writeOptionalInteger(record.unregisteredAt)
            writer.write(",\"request_id\":")
            writer.writeQuoted(record.requestID)
            writer.write(",\"observed_at\":\"")
            writer.writeISO8601(record.observedAtMilliseconds)
            writer.write("\"}")
        }
    }

    // MARK: Pieces

    @inline(__always)
    static func append(_ text: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    static func appendSource(_ source: RecordSource, to buffer: inout [UInt8]) {
        buffer.appendWriting(maxBytes: fixedPartMaxBytes + ByteWriter.quotedMaxBytes(source.topic)) {
            $0.writeSource(source)
        }
    }

    /// Decimal digits of `value`.
    static func appendUnsigned(_ value: UInt64, to buffer: inout [UInt8]) {
        buffer.appendWriting(maxBytes: ByteWriter.integerMaxBytes) { $0.writeUnsigned(value) }
    }
}

extension PushOutcome {
    /// The raw value as a literal, written without a `String`.
    var literal: StaticString {
        switch self {
        case .delivered: "delivered"
        case .rejected: "rejected"
        case .failed: "failed"
        case .expired: "expired"
        case .invalid: "invalid"
        }
    }
}

extension PushEnvironment {
    /// The raw value as a literal, written without a `String`.
    var literal: StaticString {
        switch self {
        case .production: "production"
        case .sandbox: "sandbox"
        }
    }
}

extension ByteWriter {
    /// `{"topic":…,"partition":…,"offset":…}`.
    mutating func writeSource(_ source: RecordSource) {
        write("{\"topic\":")
        writeQuoted(source.topic)
        write(",\"partition\":")
        writeInteger(Int64(source.partition))
        write(",\"offset\":")
        writeInteger(source.offset)
        write(UInt8(ascii: "}"))
    }

    mutating func writeOptionalQuoted(_ value: String?) {
        if let value {
            writeQuoted(value)
        } else {
            write("null")
        }
    }

    mutating func writeOptionalInteger(_ value: Int64?) {
        if let value {
            writeInteger(value)
        } else {
            write("null")
        }
    }

    /// `value` rounded to one decimal place, always written with that decimal (`18.4`, `0.0`);
    /// non-finite values are written `0.0`.
    mutating func writeOneDecimal(_ value: Double) {
        let scaled = (value * 10).rounded()
        guard scaled.isFinite, abs(scaled) < 9.0e17 else {
            write("0.0")
            return
        }
        let tenths = Int64(scaled)
        if tenths < 0 { write(UInt8(ascii: "-")) }
        let magnitude = tenths.magnitude
        writeUnsigned(magnitude / 10)
        write(UInt8(ascii: "."))
        write(UInt8(ascii: "0") + UInt8(magnitude % 10))
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
