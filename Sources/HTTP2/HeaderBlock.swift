import CNGHTTP2

/// Builds an `nghttp2_nv` array for one header block in stack-allocated scratch memory: no heap
/// allocation per request (nghttp2 copies names and values during the submit call).
package struct HeaderBlock {
    private let bytes: UnsafeMutableBufferPointer<UInt8>
    private let fields: UnsafeMutableBufferPointer<nghttp2_nv>
    private var byteCount = 0
    package private(set) var count = 0

    /// Runs `body` with a builder holding up to `fieldCount` fields and `byteCapacity` bytes of
    /// names and values.
    package static func with<Result>(fieldCount: Int, byteCapacity: Int, _ body: (inout HeaderBlock) -> Result) -> Result {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(byteCapacity, 1)) { bytes in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(fieldCount, 1)) { fields in
                var block = HeaderBlock(bytes: bytes, fields: fields)
                return body(&block)
            }
        }
    }

    /// The bytes a string needs in the block.
    @inline(__always)
    package static func size(_ text: String) -> Int { text.utf8.count }

    /// The bytes a static string (a pseudo-header name or fixed value) needs in the block.
    @inline(__always)
    package static func size(_ text: StaticString) -> Int { text.utf8CodeUnitCount }

    /// Bytes still free in the block.
    var remainingCapacity: Int { bytes.count - byteCount }

    /// Appends a field with a static name (e.g. a pseudo header).
    package mutating func add(_ name: StaticString, _ value: String) {
        let nameStart = byteCount
        let nameBuffer = UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        append(nameBuffer)
        appendField(nameStart: nameStart, nameLength: name.utf8CodeUnitCount, value: value)
    }

    /// Appends a field.
    package mutating func add(_ name: String, _ value: String) {
        let nameStart = byteCount
        appendString(name)
        appendField(nameStart: nameStart, nameLength: byteCount - nameStart, value: value)
    }

    /// The fields, valid inside the `with` closure.
    package var nameValues: UnsafeMutablePointer<nghttp2_nv> {
        // invariant: temporary allocations of capacity >= 1 always have a base address.
        fields.baseAddress!
    }

    private mutating func appendField(nameStart: Int, nameLength: Int, value: String) {
        let valueStart = byteCount
        appendString(value)
        precondition(count < fields.count, "HeaderBlock: more fields than it was sized for")
        // invariant: temporary allocations of capacity >= 1 always have a base address.
        let base = bytes.baseAddress!
        fields[count] = nghttp2_nv(name: base + nameStart, value: base + valueStart, namelen: nameLength,
                                   valuelen: byteCount - valueStart, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        count += 1
    }

    private mutating func appendString(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    private mutating func append(_ source: UnsafeRawBufferPointer) {
        guard let sourceBase = source.baseAddress, source.count > 0 else { return }
        // Writing past the scratch memory would corrupt the stack: refuse instead.
        precondition(source.count <= bytes.count - byteCount, "HeaderBlock: bytes beyond the capacity it was sized for")
        // invariant: temporary allocations of capacity >= 1 always have a base address.
        UnsafeMutableRawPointer(bytes.baseAddress! + byteCount).copyMemory(from: sourceBase, byteCount: source.count)
        byteCount += source.count
    }
}

extension HeaderBlock {
    /// Runs `body` with the header block of a POST request: `:method`, `:scheme`, `:authority`,
    /// `:path`, then the request's headers, in scratch memory sized from exactly those bytes.
    static func withRequestHeaders<Result>(
        authority: String,
        request: HTTP2Request,
        _ body: (inout HeaderBlock) -> Result
    ) -> Result {
        var byteCapacity = size(":method") + size("POST") + size(":scheme") + size("https")
            + size(":authority") + size(authority) + size(":path") + size(request.path)
        for header in request.headers {
            byteCapacity += size(header.name) + size(header.value)
        }
        return with(fieldCount: 4 + request.headers.count, byteCapacity: byteCapacity) { block in
            block.add(":method", "POST")
            block.add(":scheme", "https")
            block.add(":authority", authority)
            block.add(":path", request.path)
            for header in request.headers { block.add(header.name, header.value) }
            return body(&block)
        }
    }
}
