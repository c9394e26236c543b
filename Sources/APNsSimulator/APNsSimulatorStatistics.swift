/// What the simulator saw and did since it started (or since ``APNsSimulator/resetStatistics()``).
public struct APNsSimulatorStatistics: Sendable, Equatable {
    /// TLS + HTTP/2 connections that completed their handshake.
    public var connectionsAccepted = 0
    /// Connections closed (GOAWAY) to make room for a new one at the connection limit: the
    /// ones without a request being answered for the longest time.
    public var connectionsEvicted = 0
    /// New connections closed at once at the connection limit, a request being answered on
    /// every open one.
    public var connectionsRefused = 0
    /// Complete requests received (every stream that reached the rules or a fault).
    public var requestsReceived = 0
    /// Answers sent, by `:status`.
    public var answersByStatus: [Int: Int] = [:]
    /// Answers waiting for the `latency` fault's delay to pass (a gauge: a reset of the
    /// statistics keeps it).
    public var answersWaiting = 0
    /// Answers not sent because their stream closed while they waited for the `latency` fault's
    /// delay (the client reset the stream, e.g. at its own timeout, or the connection closed).
    public var answersWithdrawn = 0
    /// PING frames received and acknowledged.
    public var pingsAnswered = 0
    /// The most streams open at once on one connection (HTTP/2 refuses streams above the
    /// announced limit before the simulator sees them).
    public var peakOpenStreams = 0
    /// GOAWAY frames sent by the `goAwayEveryStreams` fault.
    public var goAwaysSent = 0
    /// Connections closed by the `dropConnectionEveryStreams` fault.
    public var connectionsDropped = 0
    /// Connections that went silent through the `halfOpenAfterStreams` fault.
    public var connectionsHalfOpened = 0
    /// Streams left unanswered by the `stallRate` fault.
    public var streamsStalled = 0
    /// PING acknowledgements the clients sent (answers to the simulator's own PINGs).
    public var pingAcknowledgementsReceived = 0
    /// SETTINGS acknowledgements the clients sent (the initial SETTINGS included).
    public var settingsAcknowledgementsReceived = 0

    /// Nothing seen yet.
    public init() {}

    /// Answers sent, all statuses together.
    public var answers: Int { answersByStatus.values.reduce(0, +) }
}
