/// How much of the DATA a client connection reads is read for nothing (past a body's cap, or on
/// streams already reset, as a peer ignoring RST_STREAM sends), measured per refill of the
/// connection's receive window: a peer that makes more than `limit` bytes of one refill waste
/// is cut off, while a connection open for days may collect any number of late answers to
/// timed-out streams over its life. Loop thread (the connection's).
struct DiscardedDataMeter {
    /// The most bytes of one refill that may be read for nothing.
    let limit: Int
    /// Bytes kept in response bodies since the last refill.
    private var keptSinceRefill = 0
    /// Whether the first window update was seen: it raises the window (``HTTP2Session``), it
    /// gives back nothing that was read.
    private var windowRaised = false

    init(limit: Int) {
        self.limit = limit
    }

    /// `bytes` of DATA went into a response body.
    mutating func kept(_ bytes: Int) {
        keptSinceRefill += bytes
    }

    /// The connection gave `increment` bytes of DATA back to the peer (a WINDOW_UPDATE).
    /// - Returns: the bytes of this refill read for nothing when they are more than `limit`,
    ///   else nil.
    mutating func refilled(_ increment: Int) -> Int? {
        guard windowRaised else {
            windowRaised = true
            return nil
        }
        let discarded = increment - keptSinceRefill
        keptSinceRefill = 0
        return discarded > limit ? discarded : nil
    }
}
