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
/// (``HTTP2EncodedOnceSwaps``), made here once with nghttp2's own deflater: the bytes on the
/// wire are the ones nghttp2 would have written. A never-indexed literal changes neither side's
/// dynamic table, so the swap leaves both HPACK contexts as they were.
///
/// Only a field nghttp2 writes as a never-indexed literal can be encoded once (the initializer
/// returns nil for any other). Requests whose header block could come near the smallest frame
/// size keep their value (``HeaderBlock`` checks ``maxBlockBytes`` and ``maxBlockFields``), so
/// every block holding the stand-in is one HEADERS frame with room for the swap.
package final class HTTP2EncodedOnceField: Sendable {
    /// The header name (lower case).
    package let name: StaticString
    /// The value the field stands for.
    package let value: String
    /// The value a request's block carries in the field's place until the frame leaves (one of
    /// ``standInValues``).
    let standInValue: StaticString
    /// The field's representation: a never-indexed literal, as nghttp2's deflater writes it.
    let encoded: [UInt8]
    /// The stand-in's representation, as the connection's session writes it into a block.
    let standInEncoded: [UInt8]
    /// Its first byte: most representations of a block differ from it there.
    private let standInFirstByte: UInt8

    /// The stand-in values: a field and the one it replaced use different ones, so that a frame
    /// submitted before the change still gets the value it was submitted with.
    static let standInValues: (StaticString, StaticString) = ("-", "~")
    /// The most bytes of values and names a block holding the stand-in may have: with the
    /// representations' own bytes and the swapped-in value it stays far below 16,384, the
    /// smallest SETTINGS_MAX_FRAME_SIZE a peer may announce, so it is never split into
    /// CONTINUATION frames.
    static let maxBlockBytes = 8 * 1024
    /// The most fields such a block may have (each adds its name and a few bytes of its own).
    static let maxBlockFields = 64
    /// The longest value encoded once (a provider token is about 190 bytes).
    static let maxValueBytes = 1024

    /// Encodes `name: value`, to stand in for as `standIn` (one of ``standInValues``); nil when
    /// nghttp2 would not write it as a never-indexed literal, or the value is empty, not ASCII
    /// or longer than ``maxValueBytes``: such a field is sent as usual.
    init?(name: StaticString, value: String, standIn: StaticString) {
        guard !value.isEmpty, value.utf8.count <= Self.maxValueBytes, value.utf8.allSatisfy({ $0 < 0x80 }),
              let encoded = Self.deflate(name: name, value: value),
              let standInEncoded = Self.deflate(name: name, value: standIn.description),
              Self.isNeverIndexedLiteral(encoded), Self.isNeverIndexedLiteral(standInEncoded) else { return nil }
        self.name = name
        self.value = value
        self.standInValue = standIn
        self.encoded = encoded
        self.standInEncoded = standInEncoded
        self.standInFirstByte = standInEncoded[0]  // a never-indexed literal has at least three bytes
    }

    /// Whether `name: value` is this field: the same name and the same bytes of value. The
    /// field's value is ASCII, so a `String` equal to it with as many UTF-8 bytes has the same
    /// bytes (a character that canonical equivalence maps to ASCII takes more bytes than its
    /// ASCII equivalent); a value sharing the field's storage compares in one step.
    @inline(__always)
    func matches(_ otherName: StaticString, _ otherValue: String) -> Bool {
        guard otherName.utf8CodeUnitCount == name.utf8CodeUnitCount,
              otherName.utf8Start == name.utf8Start
                || memcmp(otherName.utf8Start, name.utf8Start, name.utf8CodeUnitCount) == 0 else { return false }
        return otherValue.utf8.count == value.utf8.count && otherValue == value
    }

    /// Whether the stand-in's representation starts at `position` of `chunk` (before `end`).
    func standsIn(_ chunk: UnsafeBufferPointer<UInt8>, at position: Int, end: Int) -> Bool {
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
    static func deflate(name: StaticString, value: String) -> [UInt8]? {
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
