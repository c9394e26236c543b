/// What a client connection swaps into its HEADERS frames as they leave
/// `nghttp2_session_mem_send`: the field its new requests carry the stand-in of
/// (``HTTP2EncodedOnceField``), and the field before it, for requests submitted before the
/// change and not written yet. The two have different stand-in values, so each frame gets the
/// value it was submitted with. A frame waits for the socket for milliseconds, a provider token
/// for 20 minutes at least: two fields cover every frame in flight. The same walk over a frame's
/// block also swaps in the frame's own request path, written plain (``HTTP2PlainPath``), which
/// the connection passes per frame. Loop thread (the connection's), like the session.
package struct HTTP2EncodedOnceSwaps: Sendable {
    /// The field new requests carry the stand-in of; nil: new requests carry their own values.
    package private(set) var current: HTTP2EncodedOnceField?
    /// The field before it, while frames submitted with its stand-in may still wait.
    private var previous: HTTP2EncodedOnceField?

    package init() {}

    /// Whether any frame may hold a stand-in.
    var isActive: Bool { current != nil || previous != nil }

    /// Makes `name: value` the field new requests carry the stand-in of (nil: none), keeping the
    /// one it replaces for frames already submitted with it. The same field again changes
    /// nothing (a comparison). Returns whether anything changed.
    @discardableResult
    package mutating func encode(_ name: StaticString, value: String?) -> Bool {
        if let current, let value, current.matches(name, value) { return false }
        guard current != nil || value != nil else { return false }
        let replaced = current ?? previous
        let standIn = replaced?.standInValue.utf8Start == HTTP2EncodedOnceField.standInValues.0.utf8Start
            ? HTTP2EncodedOnceField.standInValues.1 : HTTP2EncodedOnceField.standInValues.0
        current = value.flatMap { HTTP2EncodedOnceField(name: name, value: $0, standIn: standIn) }
        previous = replaced
        return true
    }

    /// Appends `chunk` (one frame from `nghttp2_session_mem_send`) to `output`; when it is a
    /// HEADERS frame whose block holds stand-ins, with the representations they stand for in
    /// their place (the field encoded once, and `plainPath`, the frame's request path, written
    /// plain) and the frame's length changed to match.
    /// - Returns: whether anything was swapped.
    ///
    /// `mutating` though it changes nothing: the caller's stored value is then used in place.
    /// Called on a connection's property without it, the struct is copied first, which retains
    /// and releases both fields for every frame.
    @discardableResult
    package mutating func appendSwapping(_ chunk: UnsafeBufferPointer<UInt8>, plainPath: HTTP2PlainPath? = nil,
                                         to output: inout [UInt8]) -> Bool {
        guard isActive || plainPath != nil, let block = HTTP2FrameLayout.headerBlock(ofHeadersFrame: chunk) else {
            output.append(contentsOf: chunk)
            return false
        }
        // Where the stand-ins start (-1: none), walking the block's representations until both
        // were found.
        var pathAt = -1
        var fieldAt = -1
        var field: HTTP2EncodedOnceField?
        var wantsPath = plainPath != nil
        var wantsField = isActive
        var position = block.lowerBound
        while position < block.upperBound, wantsPath || wantsField {
            if wantsPath, HTTP2PlainPath.standsIn(chunk, at: position, end: block.upperBound) {
                (pathAt, wantsPath) = (position, false)
                position += HTTP2PlainPath.standInBytes
            } else if wantsField, let found = fieldStandingIn(chunk, at: position, end: block.upperBound) {
                (field, fieldAt, wantsField) = (found, position, false)
                position += found.standInEncoded.count
            } else if let next = HPACKRepresentation.end(in: chunk, at: position, limit: block.upperBound) {
                position = next
            } else {
                break
            }
        }
        guard pathAt >= 0 || field != nil else {
            output.append(contentsOf: chunk)
            return false
        }
        let frameStart = output.count
        // The swaps in the block's order: the path before the field or after it.
        let pathFirst = pathAt >= 0 && (field == nil || pathAt < fieldAt)
        var copied = 0
        if pathFirst, let plainPath { copied = Self.append(chunk, from: copied, swapping: plainPath, at: pathAt, to: &output) }
        if let field {
            output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[copied..<fieldAt]))
            output.append(contentsOf: field.encoded)
            copied = fieldAt + field.standInEncoded.count
        }
        if !pathFirst, pathAt >= 0, let plainPath { copied = Self.append(chunk, from: copied, swapping: plainPath, at: pathAt, to: &output) }
        output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[copied...]))
        let length = output.count - frameStart - HTTP2FrameLayout.headerBytes
        output[frameStart] = UInt8(truncatingIfNeeded: length >> 16)
        output[frameStart + 1] = UInt8(truncatingIfNeeded: length >> 8)
        output[frameStart + 2] = UInt8(truncatingIfNeeded: length)
        return true
    }

    /// Appends `chunk`'s bytes from `start` up to the path's stand-in at `position`, then the
    /// path's plain representation; returns where the bytes after the stand-in start.
    private static func append(_ chunk: UnsafeBufferPointer<UInt8>, from start: Int, swapping plainPath: HTTP2PlainPath,
                               at position: Int, to output: inout [UInt8]) -> Int {
        output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[start..<position]))
        plainPath.appendRepresentation(to: &output)
        return position + HTTP2PlainPath.standInBytes
    }

    /// The field encoded once (the current one or the one before) whose stand-in's
    /// representation starts at `position`.
    private func fieldStandingIn(_ chunk: UnsafeBufferPointer<UInt8>, at position: Int, end: Int) -> HTTP2EncodedOnceField? {
        if let current, current.standsIn(chunk, at: position, end: end) { return current }
        if let previous, previous.standsIn(chunk, at: position, end: end) { return previous }
        return nil
    }
}
