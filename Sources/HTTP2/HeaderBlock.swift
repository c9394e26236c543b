import CNGHTTP2
import Observability

/// Builds an `nghttp2_nv` array for one header block in stack-allocated scratch memory: no heap
/// allocation per request (nghttp2 copies values, and names given as `String`, during the submit
/// call). Names given as `StaticString` are not copied into the block: they live in the binary's
/// constant data, and nghttp2 keeps pointers to them.
package struct HeaderBlock {
    private let bytes: UnsafeMutableBufferPointer<UInt8>
    private let fields: UnsafeMutableBufferPointer<nghttp2_nv>
    private var byteCount = 0
    package private(set) var count = 0
    /// The connection's field encoded once: a field equal to it gets the stand-in value.
    private var encodedOnce: HTTP2EncodedOnceField?
    /// Whether `addPath` may put the stand-in of a plain path in the block (see `withRequestHeaders`).
    private var plainPathAllowed = false
    /// The path `addPath` put a stand-in in the block for: its frame gets it back (``HTTP2PlainPath``).
    private var plainPath: HTTP2PlainPath?

    /// Moves out the path `addPath` put a stand-in in the block for, if any.
    package mutating func takePlainPath() -> HTTP2PlainPath? {
        plainPath.take()
    }

    /// Runs `body` with a builder holding up to `fieldCount` fields and `byteCapacity` bytes of
    /// values and of names given as `String`.
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

    /// The bytes a static string (a fixed value, or a prefix of one) needs in the block.
    @inline(__always)
    package static func size(_ text: StaticString) -> Int { text.utf8CodeUnitCount }

    /// Bytes still free in the block.
    package var remainingCapacity: Int { bytes.count - byteCount }

    /// Appends a field with a static name (e.g. a pseudo header). The field encoded once (see
    /// `withRequestHeaders`) goes in with its stand-in value, which the frame swaps for it.
    @inline(__always)  // once per field of every request: a call costs more than the body
    package mutating func add(_ name: StaticString, _ value: String) {
        let valueStart = byteCount
        if let encodedOnce, encodedOnce.matches(name, value) {
            let standIn = encodedOnce.standInValue
            append(UnsafeRawBufferPointer(start: standIn.utf8Start, count: standIn.utf8CodeUnitCount))
        } else {
            appendString(value)
        }
        appendField(staticName: name, valueStart: valueStart)
    }

    /// Appends a field whose value is `prefix` followed by `value` (e.g. a path and its last
    /// segment), without joining them first.
    package mutating func add(_ name: StaticString, _ prefix: StaticString, _ value: String) {
        let valueStart = byteCount
        append(UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
        appendString(value)
        appendField(staticName: name, valueStart: valueStart)
    }

    /// Appends `:path` as `prefix` followed by `value`. In a block that allows it, the path goes
    /// in as a stand-in and is kept in `plainPath`, to be written into the HEADERS frame as a
    /// plain literal (``HTTP2PlainPath``): nghttp2 would Huffman-code it for every request.
    package mutating func addPath(_ prefix: StaticString, _ value: String) {
        let byteCount = prefix.utf8CodeUnitCount + value.utf8.count
        guard plainPathAllowed, plainPath == nil, byteCount <= HTTP2PlainPath.maxBytes else {
            add(":path", prefix, value)
            return
        }
        plainPath = HTTP2PlainPath(prefix: prefix, value: value)
        let valueStart = self.byteCount
        let standIn = HTTP2PlainPath.standInValue
        append(UnsafeRawBufferPointer(start: standIn.utf8Start, count: standIn.utf8CodeUnitCount))
        appendField(staticName: ":path", valueStart: valueStart)
    }

    /// Appends a field whose value is `value` in decimal digits, without making a string of it.
    package mutating func add(_ name: StaticString, decimal value: Int64) {
        let valueStart = byteCount
        if value < 0 { reserve(1).pointee = UInt8(ascii: "-") }
        let digits = ByteWriter.digitCount(value.magnitude)
        ByteWriter.writeDigits(value.magnitude, count: digits, to: reserve(digits))
        appendField(staticName: name, valueStart: valueStart)
    }

    /// The bytes `value` takes in decimal digits (with its sign).
    package static func decimalSize(_ value: Int64) -> Int {
        ByteWriter.digitCount(value.magnitude) + (value < 0 ? 1 : 0)
    }

    /// Appends a field whose name is only known at run time; the name is copied into the block.
    /// (A distinct label, so that a literal name never lands here instead of in the `StaticString`
    /// overload: the block's capacity does not count static names.)
    package mutating func add(copyingName name: String, _ value: String) {
        let nameStart = byteCount
        appendString(name)
        let valueStart = byteCount
        appendString(value)
        // invariant: temporary allocations of capacity >= 1 always have a base address.
        appendNameValue(name: bytes.baseAddress! + nameStart, nameLength: valueStart - nameStart,
                        valueStart: valueStart, flags: NGHTTP2_NV_FLAG_NONE)
    }

    /// The fields, valid inside the `with` closure.
    package var nameValues: UnsafeMutablePointer<nghttp2_nv> {
        // invariant: temporary allocations of capacity >= 1 always have a base address.
        fields.baseAddress!
    }

    /// Records the field whose value was just appended, with a name that lives in the binary's
    /// constant data: nghttp2 keeps a pointer to it instead of copying and lower-casing it
    /// (`NGHTTP2_NV_FLAG_NO_COPY_NAME`), so the name must already be lower case.
    private mutating func appendField(staticName name: StaticString, valueStart: Int) {
        assert(name.withUTF8Buffer { !$0.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") } },
               "HeaderBlock: header names are sent as given and must be lower case")
        appendNameValue(name: UnsafeMutablePointer(mutating: name.utf8Start), nameLength: name.utf8CodeUnitCount,
                        valueStart: valueStart, flags: NGHTTP2_NV_FLAG_NO_COPY_NAME)
    }

    /// Records the field whose value was just appended (from `valueStart` to the end of the block).
    private mutating func appendNameValue(name: UnsafeMutablePointer<UInt8>, nameLength: Int, valueStart: Int,
                                          flags: nghttp2_nv_flag) {
        precondition(count < fields.count, "HeaderBlock: more fields than it was sized for")
        // invariant: temporary allocations of capacity >= 1 always have a base address.
        let base = bytes.baseAddress!
        fields[count] = nghttp2_nv(name: name, value: base + valueStart, namelen: nameLength,
                                   valuelen: byteCount - valueStart, flags: UInt8(flags.rawValue))
        count += 1
    }

    private mutating func appendString(_ text: String) {
        text.withUTF8Bytes { append(UnsafeRawBufferPointer($0)) }
    }

    private mutating func append(_ source: UnsafeRawBufferPointer) {
        guard let sourceBase = source.baseAddress, source.count > 0 else { return }
        UnsafeMutableRawPointer(reserve(source.count)).copyMemory(from: sourceBase, byteCount: source.count)
    }

    /// The next `count` bytes of the block, to be written by the caller.
    private mutating func reserve(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        // Writing past the scratch memory would corrupt the stack: refuse instead.
        precondition(count <= bytes.count - byteCount, "HeaderBlock: bytes beyond the capacity it was sized for")
        // invariant: temporary allocations of capacity >= 1 always have a base address.
        defer { byteCount += count }
        return bytes.baseAddress! + byteCount
    }
}

extension HeaderBlock {
    /// Runs `body` with the header block of a POST request: `:method`, `:scheme`, `:authority`,
    /// then the `fieldCount` fields that `writeFields` adds (`:path` and the request's headers,
    /// written from the caller's own values, with no header array or joined strings in between),
    /// whose values and run-time names take `byteCount` bytes, in scratch memory sized from
    /// exactly those bytes. A field equal to `encodedOnce` gets its stand-in value, and with
    /// `plainPath` a path written with `addPath` gets the stand-in of a plain path, unless the
    /// block is larger than `HTTP2EncodedOnceField.maxBlockBytes` or `maxBlockFields`.
    static func withRequestHeaders<Result>(
        authority: String,
        fieldCount: Int,
        byteCount: Int,
        encodedOnce: HTTP2EncodedOnceField? = nil,
        plainPath: Bool = false,
        writeFields: (inout HeaderBlock) -> Void,
        _ body: (inout HeaderBlock) -> Result
    ) -> Result {
        let byteCapacity = size("POST") + size("https") + size(authority) + byteCount
        return with(fieldCount: 3 + fieldCount, byteCapacity: byteCapacity) { block in
            if byteCapacity <= HTTP2EncodedOnceField.maxBlockBytes, 3 + fieldCount <= HTTP2EncodedOnceField.maxBlockFields {
                block.encodedOnce = encodedOnce
                block.plainPathAllowed = plainPath
            }
            block.add(":method", "POST")
            block.add(":scheme", "https")
            block.add(":authority", authority)
            writeFields(&block)
            return body(&block)
        }
    }

    /// Runs `body` with the header block of `request` (see
    /// `withRequestHeaders(authority:fieldCount:byteCount:writeFields:_:)`).
    static func withRequestHeaders<Result>(
        authority: String,
        request: HTTP2Request,
        _ body: (inout HeaderBlock) -> Result
    ) -> Result {
        var byteCount = size(request.path)
        for header in request.headers {
            byteCount += size(header.name) + size(header.value)
        }
        return withRequestHeaders(authority: authority, fieldCount: 1 + request.headers.count, byteCount: byteCount,
                                  writeFields: { block in
                                      block.add(":path", request.path)
                                      for header in request.headers { block.add(copyingName: header.name, header.value) }
                                  }, body)
    }
}
