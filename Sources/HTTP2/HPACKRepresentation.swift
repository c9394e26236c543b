/// The parts of an HTTP/2 frame (RFC 9113 §4.1) that finding a header block needs.
enum HTTP2FrameLayout {
    /// The frame header: length (24 bits), type, flags, stream id.
    static let headerBytes = 9
    static let headersType: UInt8 = 0x01
    static let endHeadersFlag: UInt8 = 0x04
    static let paddedFlag: UInt8 = 0x08
    static let priorityFlag: UInt8 = 0x20

    /// The stream id of `frame` when it is a HEADERS frame.
    static func streamID(ofHeadersFrame frame: UnsafeBufferPointer<UInt8>) -> Int32? {
        guard frame.count >= headerBytes, frame[3] == headersType else { return nil }
        return Int32(frame[5] & 0x7F) << 24 | Int32(frame[6]) << 16 | Int32(frame[7]) << 8 | Int32(frame[8])
    }

    /// The header block's bytes in `frame` when it is one whole HEADERS frame with END_HEADERS
    /// (without its pad length, priority fields and padding); nil for any other frame.
    static func headerBlock(ofHeadersFrame frame: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard frame.count >= headerBytes, frame[3] == headersType, frame[4] & endHeadersFlag != 0 else { return nil }
        let length = Int(frame[0]) << 16 | Int(frame[1]) << 8 | Int(frame[2])
        guard length == frame.count - headerBytes else { return nil }
        var start = headerBytes
        var end = frame.count
        if frame[4] & paddedFlag != 0 {
            guard start < end else { return nil }
            end -= Int(frame[start])
            start += 1
        }
        if frame[4] & priorityFlag != 0 { start += 5 }
        return start <= end ? start..<end : nil
    }
}

/// Walks HPACK field representations (RFC 7541 §6) without decoding them.
enum HPACKRepresentation {
    /// Where the representation starting at `position` ends, or nil when it runs past `limit`
    /// or is malformed.
    static func end(in bytes: UnsafeBufferPointer<UInt8>, at position: Int, limit: Int) -> Int? {
        guard position < limit else { return nil }
        let first = bytes[position]
        if first & 0x80 != 0 { return integer(in: bytes, at: position, prefixBits: 7, limit: limit)?.end }  // indexed
        if first & 0xE0 == 0x20 { return integer(in: bytes, at: position, prefixBits: 5, limit: limit)?.end }  // size update
        // A literal: with incremental indexing (01), without indexing (0000) or never indexed (0001).
        let prefixBits = first & 0xC0 == 0x40 ? 6 : 4
        guard let (index, afterIndex) = integer(in: bytes, at: position, prefixBits: prefixBits, limit: limit) else { return nil }
        var next = afterIndex
        if index == 0 {  // a literal name
            guard let nameEnd = stringEnd(in: bytes, at: next, limit: limit) else { return nil }
            next = nameEnd
        }
        return stringEnd(in: bytes, at: next, limit: limit)
    }

    /// Where the string literal (Huffman flag, length, bytes) at `position` ends.
    private static func stringEnd(in bytes: UnsafeBufferPointer<UInt8>, at position: Int, limit: Int) -> Int? {
        guard position < limit, let (length, next) = integer(in: bytes, at: position, prefixBits: 7, limit: limit),
              length <= limit - next else { return nil }
        return next + length
    }

    /// The integer with an N-bit prefix at `position` (RFC 7541 §5.1) and where it ends; at most
    /// four continuation bytes (values up to 2^28), more than any length inside one frame.
    private static func integer(in bytes: UnsafeBufferPointer<UInt8>, at position: Int, prefixBits: Int,
                                limit: Int) -> (value: Int, end: Int)? {
        let mask = (1 << prefixBits) - 1
        var value = Int(bytes[position]) & mask
        var next = position + 1
        guard value == mask else { return (value, next) }
        var shift = 0
        while next < limit, shift <= 21 {
            let byte = bytes[next]
            next += 1
            value += Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return (value, next) }
            shift += 7
        }
        return nil
    }
}
