/// Writes text into memory reserved beforehand: the pieces of a JSON record (literals, quoted
/// strings, integers) are copied without a capacity check and a possible reallocation each, as
/// `Array.append` does for every piece.
///
/// Used through `[UInt8].appendWriting(maxBytes:_:)`, which reserves `maxBytes` and keeps what
/// was written. Writing past the reservation is a programming error (the caller's bound is
/// wrong) and stops the process rather than writing out of bounds. The one exception is
/// `withWritten(trying:maxBytes:_:use:)`'s first attempt, where running out of room only marks
/// the writer `overflowed` and drops every later write.
public struct ByteWriter {
    @usableFromInline let base: UnsafeMutablePointer<UInt8>
    @usableFromInline let end: Int
    /// Whether writing past `end` stops the process (the caller's bound is exact) or only sets
    /// `overflowed` (a first attempt into scratch memory that may be too small).
    @usableFromInline let trapsOnOverflow: Bool
    /// Bytes written so far, from the start of the reserved region.
    public var count: Int { written }
    @usableFromInline var written = 0
    /// A write did not fit: what was written is incomplete and nothing more is written.
    public private(set) var overflowed = false

    init(start: UnsafeMutablePointer<UInt8>, capacity: Int, trapsOnOverflow: Bool = true) {
        base = start
        end = capacity
        self.trapsOnOverflow = trapsOnOverflow
    }

    /// The next `byteCount` bytes to fill, or nil when they do not fit (after an overflow, always).
    @inlinable
    mutating func reserve(_ byteCount: Int) -> UnsafeMutablePointer<UInt8>? {
        guard written + byteCount <= end, !overflowed else { return overflow() }
        defer { written += byteCount }
        return base + written
    }

    @usableFromInline
    mutating func overflow() -> UnsafeMutablePointer<UInt8>? {
        // invariant: with an exact bound (`trapsOnOverflow`) the caller's `maxBytes` covers
        // everything it writes; going past it would write outside the array.
        precondition(!trapsOnOverflow, "ByteWriter: more bytes written than reserved")
        overflowed = true
        return nil
    }

    /// One byte.
    @inlinable
    public mutating func write(_ byte: UInt8) {
        reserve(1)?.pointee = byte
    }

    /// A literal. Always inlined: with the literal's length known where it is written, the copy
    /// becomes a few moves instead of a call and a `memcpy`.
    @inlinable @inline(__always)
    public mutating func write(_ text: StaticString) {
        let length = text.utf8CodeUnitCount
        reserve(length)?.update(from: text.utf8Start, count: length)
    }

    /// Raw bytes.
    public mutating func write(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)?.update(from: source, count: bytes.count)
    }

    /// The most bytes `writeQuoted(value)` can write: every byte a `\u00XX` escape, and the quotes.
    public static func quotedMaxBytes(_ value: String) -> Int {
        value.utf8.count * 6 + 2
    }

    /// Exactly the bytes `writeQuoted(value)` writes (one pass over the bytes): a bound that
    /// keeps a record's scratch memory small enough for the stack.
    public static func quotedBytes(_ value: String) -> Int {
        value.withUTF8Bytes { bytes in
            var count = bytes.count + 2
            var index = firstEscapedByte(in: bytes, from: 0)
            while index < bytes.count {
                switch bytes[index] {
                case 0x0A, 0x0D, 0x09, UInt8(ascii: "\""), UInt8(ascii: "\\"): count += 1
                default: count += 5
                }
                index = firstEscapedByte(in: bytes, from: index + 1)
            }
            return count
        }
    }


    /// `value` as a quoted JSON string. Runs of bytes that need no escape (all of a token, an id
    /// or a topic) are copied at once; quotes, backslashes and control characters are escaped.
    public mutating func writeQuoted(_ value: String) {
        write(UInt8(ascii: "\""))
        value.withUTF8Bytes { bytes in
            var runStart = 0
            while true {
                let index = Self.firstEscapedByte(in: bytes, from: runStart)
                write(UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                guard index < bytes.count else { break }
                writeEscape(bytes[index])
                runStart = index + 1
            }
        }
        write(UInt8(ascii: "\""))
    }

    /// The index of the first byte from `start` on that a JSON string must escape (below 0x20, a
    /// quote or a backslash), or `bytes.count`.
    @inline(__always)
    static func firstEscapedByte(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        ByteScan.firstAttentionByte(in: bytes, from: start, stoppingAtNonASCII: false)
    }

    /// The escape sequence of a quote, a backslash or a control character.
    private mutating func writeEscape(_ byte: UInt8) {
        write(UInt8(ascii: "\\"))
        switch byte {
        case 0x0A: write(UInt8(ascii: "n"))
        case 0x0D: write(UInt8(ascii: "r"))
        case 0x09: write(UInt8(ascii: "t"))
        case 0..<0x20:
            let digits: StaticString = "0123456789abcdef"
            write("u00")
            write(digits.utf8Start[Int(byte >> 4)])
            write(digits.utf8Start[Int(byte & 0xF)])
        default: write(byte)
        }
    }

    /// The most bytes an integer takes: `-9223372036854775808`.
    public static let integerMaxBytes = 20

    /// Decimal digits of `value` (Int64.min included).
    public mutating func writeInteger(_ value: Int64) {
        if value < 0 { write(UInt8(ascii: "-")) }
        writeUnsigned(value.magnitude)
    }

    /// Decimal digits of `value`, written right to left into the reserved bytes.
    public mutating func writeUnsigned(_ value: UInt64) {
        let count = Self.digitCount(value)
        guard let target = reserve(count) else { return }
        Self.writeDigits(value, count: count, to: target)
    }

    /// The decimal digits `value` takes.
    public static func digitCount(_ value: UInt64) -> Int {
        var count = 1
        var scan = value
        while scan >= 10 {
            scan /= 10
            count += 1
        }
        return count
    }

    /// Writes the `count` (`digitCount(value)`) decimal digits of `value` at `destination`,
    /// right to left.
    public static func writeDigits(_ value: UInt64, count: Int, to destination: UnsafeMutablePointer<UInt8>) {
        var rest = value
        var position = count
        repeat {
            position -= 1
            destination[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        } while rest > 0
    }
}

extension Array where Element == UInt8 {
    /// Appends what `body` writes, at most `maxBytes`. The bytes are written into scratch memory
    /// of `maxBytes` (on the stack up to 1 KiB) and then copied after the existing ones, so the
    /// array grows by what was written, not by the bound: a bound above glibc's small-chunk
    /// limit would take the allocator's large-chunk path for every record.
    public mutating func appendWriting(maxBytes: Int, _ body: (inout ByteWriter) -> Void) {
        guard maxBytes > 0 else { return }
        ByteWriter.withWritten(maxBytes: maxBytes, body) { append(contentsOf: $0) }
    }
}

extension ByteWriter {
    /// Runs `body` to write at most `maxBytes` into scratch memory (on the stack up to 1 KiB)
    /// and hands what it wrote to `use`, for a caller that only needs the bytes for a moment
    /// (a record librdkafka copies): no array is made. Not generic over a result: a generic one
    /// made every call look up the metadata of the temporary allocation's result type at run
    /// time (about 330 instructions, a record's quoting of four strings).
    public static func withWritten(maxBytes: Int, _ body: (inout ByteWriter) -> Void,
                                   use: (UnsafeBufferPointer<UInt8>) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(maxBytes, 1)) { scratch in
            // invariant: a capacity of at least one was asked for, so the storage exists.
            var writer = ByteWriter(start: scratch.baseAddress!, capacity: max(maxBytes, 0))
            body(&writer)
            use(UnsafeBufferPointer(rebasing: scratch[..<writer.count]))
        }
    }

    /// The room `withWritten(trying:maxBytes:_:use:)` tries first: the most that stays on the stack.
    public static let firstAttemptBytes = 1024

    /// `withWritten(maxBytes:_:use:)` for a writer whose exact bound costs a pass over its
    /// strings: `body` first writes into `firstAttemptBytes` of stack scratch, and only when that
    /// overflows is `maxBytes` asked for and `body` run again with it. `body` must write the
    /// same bytes each time it runs.
    public static func withWritten(trying body: (inout ByteWriter) -> Void, maxBytes: () -> Int,
                                   use: (UnsafeBufferPointer<UInt8>) -> Void) {
        let fitted = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: firstAttemptBytes) { scratch in
            // invariant: the capacity is a positive constant, so the storage exists.
            var writer = ByteWriter(start: scratch.baseAddress!, capacity: firstAttemptBytes, trapsOnOverflow: false)
            body(&writer)
            guard !writer.overflowed else { return false }
            use(UnsafeBufferPointer(rebasing: scratch[..<writer.count]))
            return true
        }
        if !fitted {
            withWritten(maxBytes: maxBytes(), body, use: use)
        }
    }
}
