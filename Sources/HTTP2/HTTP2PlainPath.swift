import Observability

/// A request's `:path`, sent as a plain HPACK string literal instead of a Huffman-coded one.
///
/// nghttp2 Huffman-codes every literal value that comes out shorter, and offers no way to turn it
/// off; it also never indexes `:path`, so a path that changes with every request (APNs':
/// `/3/device/<token>`) is Huffman-coded anew for each one, bit by bit. HPACK lets a sender write
/// any literal plain instead (RFC 7541 §5.2, the H bit clear); the peer decodes either. So the
/// request's block carries the stand-in value `-`, and as its HEADERS frame leaves
/// `nghttp2_session_mem_send` the stand-in's representation is replaced by the path's own,
/// written here with a plain value (``HTTP2EncodedOnceSwaps``). The frame finds its path by its
/// stream id, so every request gets the path it was submitted with.
///
/// Both representations are literals without indexing (RFC 7541 §6.2.2): neither enters the
/// dynamic table, so the swap leaves both HPACK contexts as they were. A plain token path takes
/// more bytes on the wire than the Huffman-coded one (a 64-digit token: 76 bytes against 50), and
/// no bit-by-bit coding on either side.
package struct HTTP2PlainPath: Sendable {
    /// The path's fixed start (e.g. `/3/device/`).
    let prefix: StaticString
    /// The rest of it (e.g. the device token).
    let value: String

    /// The value a request's block carries in the path's place until its frame leaves.
    static let standInValue: StaticString = "-"
    /// The stand-in's representation as nghttp2 writes it: a literal without indexing of the
    /// name of static entry 4 (`:path`), then the value, plain, one byte long (`-`, which
    /// Huffman coding would not shorten). Literals, so that no lazy initialization runs for
    /// every representation compared; ``deflaterAgrees`` checks them against nghttp2 once.
    private static let standIn: (UInt8, UInt8, UInt8) = (0x04, 0x01, 0x2D)
    /// The bytes of ``standIn``.
    static let standInBytes = 3
    /// The longest path sent this way; a longer one is sent as nghttp2 writes it. Together with
    /// ``HTTP2EncodedOnceField/maxBlockBytes`` and a field encoded once it keeps a block far
    /// below the smallest frame size, so the block is never split into CONTINUATION frames.
    static let maxBytes = 1024

    /// Whether nghttp2's deflater writes `:path: -` as ``standIn``: when it does not (another
    /// version of the library), paths are sent as nghttp2 writes them.
    static let deflaterAgrees: Bool = {
        guard let encoded = HTTP2EncodedOnceField.deflate(name: ":path", value: standInValue.description) else { return false }
        return encoded == [standIn.0, standIn.1, standIn.2]
    }()

    /// Whether the stand-in's representation starts at `position` of `chunk` (before `end`).
    @inline(__always)
    static func standsIn(_ chunk: UnsafeBufferPointer<UInt8>, at position: Int, end: Int) -> Bool {
        end - position >= standInBytes && chunk[position] == standIn.0 && chunk[position + 1] == standIn.1
            && chunk[position + 2] == standIn.2
    }

    /// Appends the path's representation: the stand-in's first byte (a literal without indexing
    /// of `:path`), the length with a clear H bit (RFC 7541 §5.1, 7-bit prefix), then the bytes,
    /// in one append.
    func appendRepresentation(to output: inout [UInt8]) {
        let prefixBytes = prefix.utf8CodeUnitCount
        value.withUTF8Bytes { valueBytes in
            let length = prefixBytes + valueBytes.count
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1 + Self.maxLengthBytes + length) { scratch in
                // invariant: a temporary allocation of capacity >= 1 has a base address.
                let base = scratch.baseAddress!
                base[0] = Self.standIn.0
                var written = 1 + Self.writeLength(length, to: base + 1)
                (base + written).update(from: prefix.utf8Start, count: prefixBytes)
                written += prefixBytes
                if let valueBase = valueBytes.baseAddress {
                    (base + written).update(from: valueBase, count: valueBytes.count)
                    written += valueBytes.count
                }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<written]))
            }
        }
    }

    /// Room for ``writeLength(_:to:)``: lengths up to ``maxBytes`` take at most three bytes.
    private static let maxLengthBytes = 5

    /// Writes `length` as an HPACK integer with a 7-bit prefix and the H bit clear.
    /// - Returns: the bytes written.
    static func writeLength(_ length: Int, to destination: UnsafeMutablePointer<UInt8>) -> Int {
        guard length >= 0x7F else {
            destination[0] = UInt8(length)
            return 1
        }
        destination[0] = 0x7F
        var rest = length - 0x7F
        var written = 1
        while rest >= 0x80 {
            destination[written] = UInt8(truncatingIfNeeded: rest & 0x7F) | 0x80
            rest >>= 7
            written += 1
        }
        destination[written] = UInt8(rest)
        return written + 1
    }
}
