/// What a client connection swaps into its HEADERS frames as they leave
/// `nghttp2_session_mem_send`: the field its new requests carry the stand-in of
/// (``HTTP2EncodedOnceField``), and the field before it, for requests submitted before the
/// change and not written yet. The two have different stand-in values, so each frame gets the
/// value it was submitted with. A frame waits for the socket for milliseconds, a provider token
/// for 20 minutes at least: two fields cover every frame in flight. Loop thread (the
/// connection's), like the session.
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
    /// HEADERS frame whose block holds a stand-in, with its field's representation in the
    /// stand-in's place and the frame's length changed to match.
    /// - Returns: whether a stand-in was swapped.
    ///
    /// `mutating` though it changes nothing: the caller's stored value is then used in place.
    /// Called on a connection's property without it, the struct is copied first, which retains
    /// and releases both fields for every frame.
    @discardableResult
    package mutating func appendSwapping(_ chunk: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) -> Bool {
        guard let (field, at) = standIn(in: chunk) else {
            output.append(contentsOf: chunk)
            return false
        }
        let frameStart = output.count
        output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[..<at]))
        output.append(contentsOf: field.encoded)
        output.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[(at + field.standInEncoded.count)...]))
        let length = output.count - frameStart - HTTP2FrameLayout.headerBytes
        output[frameStart] = UInt8(truncatingIfNeeded: length >> 16)
        output[frameStart + 1] = UInt8(truncatingIfNeeded: length >> 8)
        output[frameStart + 2] = UInt8(truncatingIfNeeded: length)
        return true
    }

    /// The field whose stand-in's representation `chunk` holds, and where it starts, when
    /// `chunk` is one whole HEADERS frame (END_HEADERS set) whose block holds one.
    func standIn(in chunk: UnsafeBufferPointer<UInt8>) -> (HTTP2EncodedOnceField, Int)? {
        guard isActive, let block = HTTP2FrameLayout.headerBlock(ofHeadersFrame: chunk) else { return nil }
        var position = block.lowerBound
        while position < block.upperBound {
            if let current, current.standsIn(chunk, at: position, end: block.upperBound) { return (current, position) }
            if let previous, previous.standsIn(chunk, at: position, end: block.upperBound) { return (previous, position) }
            guard let next = HPACKRepresentation.end(in: chunk, at: position, limit: block.upperBound) else { return nil }
            position = next
        }
        return nil
    }
}
