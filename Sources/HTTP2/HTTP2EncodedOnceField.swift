#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2

/// A header field that a client connection sends on most of its requests with one value (APNs'
/// provider token: about 190 bytes, the same for up to an hour), HPACK-encoded once instead of
/// once per request.
///
/// nghttp2 writes an `authorization` field as a never-indexed literal (RFC 7541 §6.2.3: it never
/// enters the dynamic table) and takes no header block encoded beforehand, so it would
/// Huffman-code the same value for every request. Instead the request's block carries a
/// one-byte stand-in value (``standInValue``), and as each HEADERS frame leaves
/// `nghttp2_session_mem_send` the stand-in's representation is replaced by the field's own
/// (``appendSwapping(_:to:)``), made here once with nghttp2's own deflater: the bytes on the
/// wire are the ones nghttp2 would have written. A never-indexed literal changes neither side's
/// dynamic table, so the swap leaves both HPACK contexts as they were.
///
/// Only a field nghttp2 writes as a never-indexed literal can be encoded once (the initializer
/// returns nil for any other). Requests whose header block could come near the smallest frame
/// size keep their value (``HeaderBlock`` checks ``maxBlockBytes``), so every block holding the
/// stand-in is one HEADERS frame with room for the swap.
package final class HTTP2EncodedOnceField: Sendable {
    /// The header name (lower case).
    package let name: StaticString
    /// The value the field stands for.
    package let value: String
    /// The field's representation: a never-indexed literal, as nghttp2's deflater writes it.
    let encoded: [UInt8]
    /// The stand-in's representation, as the connection's session writes it into a block.
    let standInEncoded: [UInt8]
    /// Its first byte: most representations of a block differ from it there.
    private let standInFirstByte: UInt8

    /// The value a request's block carries in the field's place until the frame leaves.
    static let standInValue: StaticString = "-"
    /// The most bytes of values and names a block holding the stand-in may have: with the
    /// representations' own bytes and the swapped-in value it stays far below 16,384, the
    /// smallest SETTINGS_MAX_FRAME_SIZE a peer may announce, so it is never split into
    /// CONTINUATION frames.
    static let maxBlockBytes = 8 * 1024
    /// The longest value encoded once (a provider token is about 190 bytes).
    static let maxValueBytes = 1024

    /// Encodes `name: value`; nil when nghttp2 would not write it as a never-indexed literal, or
    /// the value is longer than ``maxValueBytes``: such a field is sent as usual.
    package init?(name: StaticString, value: String) {
        guard !value.isEmpty, value.utf8.count <= Self.maxValueBytes,
              let encoded = Self.deflate(name: name, value: value),
              let standIn = Self.deflate(name: name, value: Self.standInValue.description),
              Self.isNeverIndexedLiteral(encoded), Self.isNeverIndexedLiteral(standIn) else { return nil }
        self.name = name
        self.value = value
        self.encoded = encoded
        self.standInEncoded = standIn
        self.standInFirstByte = standIn[0]
    }

    /// Whether `name: value` is this field (the same name and value).
    @inline(__always)
    func matches(_ otherName: StaticString, _ otherValue: String) -> Bool {
        otherName.utf8CodeUnitCount == name.utf8CodeUnitCount
            && memcmp(otherName.utf8Start, name.utf8Start, name.utf8CodeUnitCount) == 0
            && otherValue == value
    }

    /// Appends `chunk` (one frame from `nghttp2_session_mem_send`) to `output`; when it is a
    /// HEADERS frame whose block holds the stand-in, with the field's representation in the
    /// stand-in's place and the frame's length changed to match.
    /// - Returns: whether the stand-in was swapped.
    @discardableResult
    package func appendSwapping(_ chunk: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) -> Bool {
        guard let at = standInPosition(in: chunk) else {
            output.append(contentsOf: chunk)
            return false
        }
        let frameStart = output.count
        output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[..<at]))
        output.append(contentsOf: encoded)
        output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[(at + standInEncoded.count)...]))
        let length = output.count - frameStart - HTTP2FrameLayout.headerBytes
        output[frameStart] = UInt8(truncatingIfNeeded: length >> 16)
        output[frameStart + 1] = UInt8(truncatingIfNeeded: length >> 8)
        output[frameStart + 2] = UInt8(truncatingIfNeeded: length)
        return true
    }

    /// Where the stand-in's representation starts in `chunk`, when `chunk` is one whole HEADERS
    /// frame (END_HEADERS set) whose block holds it.
    func standInPosition(in chunk: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let block = HTTP2FrameLayout.headerBlock(ofHeadersFrame: chunk) else { return nil }
        var position = block.lowerBound
        while position < block.upperBound {
            if startsWithStandIn(chunk, at: position, end: block.upperBound) { return position }
            guard let next = HPACKRepresentation.end(in: chunk, at: position, limit: block.upperBound) else { return nil }
            position = next
        }
        return nil
    }

    private func startsWithStandIn(_ chunk: UnsafeBufferPointer<UInt8>, at position: Int, end: Int) -> Bool {
        guard chunk[position] == standInFirstByte, end - position >= standInEncoded.count,
              let base = chunk.baseAddress else { return false }
        return standInEncoded.withUnsafeBytes { standIn in
            // invariant: the stand-in's representation is never empty (a literal has at least three bytes).
            memcmp(base + position, standIn.baseAddress!, standIn.count) == 0
        }
    }

    /// HPACK's never-indexed literal (`0001xxxx`), the only kind that leaves both tables alone.
    private static func isNeverIndexedLiteral(_ representation: [UInt8]) -> Bool {
        guard let first = representation.first, first & 0xF0 == 0x10 else { return false }
        return representation.withUnsafeBufferPointer {
            HPACKRepresentation.end(in: $0, at: 0, limit: $0.count) == $0.count
        }
    }

    /// `name: value` encoded by a fresh nghttp2 deflater (the default 4,096-byte table, so that
    /// no table size update comes first).
    private static func deflate(name: StaticString, value: String) -> [UInt8]? {
        var deflater: OpaquePointer?
        guard nghttp2_hd_deflate_new(&deflater, 4096) == 0, let deflater else { return nil }
        defer { nghttp2_hd_deflate_del(deflater) }
        var valueBytes = Array(value.utf8)
        return valueBytes.withUnsafeMutableBufferPointer { valuePointer -> [UInt8]? in
            var field = nghttp2_nv(name: UnsafeMutablePointer(mutating: name.utf8Start), value: valuePointer.baseAddress,
                                   namelen: name.utf8CodeUnitCount, valuelen: valuePointer.count,
                                   flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            let bound = nghttp2_hd_deflate_bound(deflater, &field, 1)
            var output = [UInt8](repeating: 0, count: bound)
            let written = output.withUnsafeMutableBufferPointer {
                nghttp2_hd_deflate_hd(deflater, $0.baseAddress, $0.count, &field, 1)
            }
            guard written > 0 else { return nil }
            output.removeSubrange(written...)
            return output
        }
    }
}

/// The parts of an HTTP/2 frame (RFC 9113 §4.1) that finding a header block needs.
enum HTTP2FrameLayout {
    /// The frame header: length (24 bits), type, flags, stream id.
    static let headerBytes = 9
    static let headersType: UInt8 = 0x01
    static let endHeadersFlag: UInt8 = 0x04
    static let paddedFlag: UInt8 = 0x08
    static let priorityFlag: UInt8 = 0x20

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
