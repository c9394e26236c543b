/// Which streams' HEADERS frames went into the connection's output, and which of them the
/// socket has taken, so that a stream the server cannot have processed is told apart from one
/// it may have.
///
/// A HEADERS frame goes into the connection's output (``TLSConnection``'s buffer) when nghttp2
/// writes it, and reaches the socket later: while the socket would block, a frame can wait in
/// the output. What a lost connection leaves in the output never goes out, so a stream whose
/// frame was still there ends `.refused` (re-sent without counting as an attempt). While the
/// connection lives, a frame in the output still goes out, even after the stream was reset, so
/// there a stream counts from the moment its frame entered the output (``highestProduced``).
/// The socket takes the output in order and nghttp2 writes new streams' HEADERS in the order of
/// their ids, so each mark is one stream id. Bytes the socket took are whole TLS records
/// (``TLSConnection/bytesWritten``): what the kernel holds may reach the server, so it counts.
///
/// Loop thread only (a member of ``HTTP2ClientConnection``).
struct HTTP2WrittenStreams {
    /// The highest stream whose HEADERS frame the socket took (0: none).
    private(set) var highest: Int32 = 0
    /// The highest stream whose HEADERS frame went into the output (0: none).
    private(set) var highestProduced: Int32 = 0
    /// HEADERS frames in the output that the socket had not taken when last asked, in output
    /// order: where each ends in the output's running byte count, and its stream.
    private var waiting: [(end: Int, streamID: Int32)] = []
    /// The first entry of `waiting` still waiting.
    private var head = 0

    /// A HEADERS frame of `streamID` went into the output, its last byte at `end` of the
    /// output's running count (``TLSConnection/bytesProduced`` after it).
    mutating func appended(streamID: Int32, endingAt end: Int) {
        highestProduced = max(highestProduced, streamID)
        waiting.append((end, streamID))
    }

    /// A HEADERS frame of `streamID` left for the server at once (an output that is not a socket).
    mutating func written(streamID: Int32) {
        highestProduced = max(highestProduced, streamID)
        highest = max(highest, streamID)
    }

    /// The socket has taken `bytesWritten` bytes of the output so far
    /// (``TLSConnection/bytesWritten``).
    mutating func socketTook(_ bytesWritten: Int) {
        guard head < waiting.count, waiting[head].end <= bytesWritten else { return }
        repeat {
            highest = max(highest, waiting[head].streamID)
            head += 1
        } while head < waiting.count && waiting[head].end <= bytesWritten
        if head == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= waiting.count {
            // An output never quite empty when a frame is added (a socket that is always a
            // little behind) would never reach the reset above: the taken entries go here.
            waiting.removeFirst(head)
            head = 0
        }
    }

    /// HEADERS frames still waiting in the output, as last asked (tests).
    var waitingCount: Int { waiting.count - head }
    /// Entries kept, taken ones included (tests).
    var storedCount: Int { waiting.count }
}
