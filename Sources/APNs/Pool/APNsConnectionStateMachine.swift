/// The life of one pool connection, apart from sockets: connecting, ready, draining after GOAWAY,
/// closing, backing off before the next attempt; PING keep-alive and its deadline.
///
/// A value type: each method takes an event and the time and returns what to do. The owner
/// (`APNsConnectionPool`) performs the actions on its loop and calls `tick` when `nextDeadline`
/// comes.
struct APNsConnectionStateMachine {
    /// Timings.
    struct Configuration {
        /// Idle time (no frame received) after which a PING is sent.
        var pingIntervalNanoseconds: Int64
        /// How long a PING may stay unacknowledged before the connection is replaced.
        var pingTimeoutNanoseconds: Int64
        /// Reconnect delays (equal jitter: never below half the ceiling).
        var reconnect: APNsBackoff
        /// A connection ready at least this long resets the reconnect backoff when it closes.
        var stableAfterNanoseconds: Int64 = 10_000_000_000
        /// How long a ready connection may allow no streams at all (SETTINGS_MAX_CONCURRENT_STREAMS
        /// 0) before it is replaced: the pool sets the request timeout, the longest a stream may
        /// wait for its answer.
        var zeroStreamLimitTimeoutNanoseconds: Int64 = 10_000_000_000
    }

    enum State: Equatable {
        /// Not started, or shut down.
        case closed
        /// Opening; `since` for the logs.
        case connecting(since: Int64)
        /// Taking streams since `since`.
        case ready(since: Int64)
        /// GOAWAY received: its open streams finish, no new ones start. `readySince` is when it
        /// became ready (how long it served decides whether its close counts as a failure).
        case draining(readySince: Int64)
        /// The pool asked it to close; waiting for the connection to report it closed.
        case closing(APNsConnectionCloseReason, readySince: Int64?)
        /// Waiting until `until` before connecting again.
        case backingOff(until: Int64)
    }

    enum Action: Equatable {
        case none
        /// Open a new connection.
        case connect
        /// Send a PING on the connection.
        case sendPing
        /// Close the connection (its open streams then fail and go back to the pool).
        case close(APNsConnectionCloseReason)
    }

    let configuration: Configuration
    private let jitter: APNsJitterSource
    private(set) var state: State = .closed
    /// Connections in a row that failed (reset by a stable one).
    private(set) var consecutiveFailures = 0
    private var isShutDown = false
    /// The last time a frame arrived (or the connection became ready).
    private var lastActivity: Int64 = 0
    /// When the outstanding PING was sent.
    private(set) var pingSentAt: Int64?
    /// When a stream of this connection last timed out with no sign of the peer since: the
    /// connection may be half-open, so it takes no new streams until its PING is acknowledged
    /// (or any frame arrives) and is closed if none is.
    private(set) var suspectSince: Int64?
    /// Since when the server has allowed no streams (its SETTINGS_MAX_CONCURRENT_STREAMS is 0):
    /// a ready connection that takes nothing, answers PINGs and would otherwise hold the pool's
    /// notifications forever while it counts as up.
    private(set) var zeroStreamLimitSince: Int64?

    init(configuration: Configuration, jitter: APNsJitterSource) {
        self.configuration = configuration
        self.jitter = jitter
    }

    /// The name counted by `APNsClient.connectionStates`.
    var stateName: APNsConnectionStateName {
        switch state {
        case .closed: .closed
        case .connecting: .connecting
        case .ready: .ready
        case .draining, .closing: .draining
        case .backingOff: .backoff
        }
    }

    /// Whether new streams may go to this connection: ready, and not suspected of being half-open.
    var acceptsStreams: Bool {
        if case .ready = state { return suspectSince == nil }
        return false
    }

    // MARK: - Events

    /// The pool starts: connect now.
    mutating func start(now: Int64) -> Action {
        guard case .closed = state, !isShutDown else { return .none }
        state = .connecting(since: now)
        return .connect
    }

    /// Handshake done and the server's SETTINGS arrived.
    mutating func becameReady(now: Int64) {
        guard case .connecting = state else { return }
        state = .ready(since: now)
        lastActivity = now
        pingSentAt = nil
        suspectSince = nil
    }

    /// A frame arrived at `at` (any frame proves the peer alive).
    mutating func receivedTraffic(at: Int64) {
        lastActivity = max(lastActivity, at)
        if let since = suspectSince, at > since { suspectSince = nil }
    }

    /// The outstanding PING was acknowledged.
    mutating func pingAcknowledged(now: Int64) {
        pingSentAt = nil
        suspectSince = nil
        lastActivity = max(lastActivity, now)
    }

    /// A stream of this connection got no answer in time: the connection takes no new streams
    /// until the peer shows it is alive, and a PING checks it at once (a half-open connection is
    /// then found after `pingTimeout`, not after `pingInterval`).
    mutating func streamTimedOut(now: Int64) -> Action {
        switch state {
        case .ready, .draining:
            suspectSince = suspectSince ?? now
            guard pingSentAt == nil else { return .none }
            pingSentAt = now
            return .sendPing
        default:
            return .none
        }
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS is now `limit` (also before it is ready: its
    /// first SETTINGS make it ready).
    mutating func peerStreamLimitChanged(_ limit: Int, now: Int64) {
        zeroStreamLimitSince = limit == 0 ? (zeroStreamLimitSince ?? now) : nil
    }

    /// The server sent GOAWAY: no new streams; the pool closes it once its streams are done.
    mutating func goAwayReceived() {
        if case .ready(let since) = state { state = .draining(readySince: since) }
    }

    /// A draining connection finished its last stream, or a ready one ran out of stream ids.
    mutating func noStreamsLeft(canStartStreams: Bool) -> Action {
        switch state {
        case .draining:
            return requestClose(.goAway)
        case .ready where !canStartStreams:
            return requestClose(.streamIDsExhausted)
        default:
            return .none
        }
    }

    /// The pool wants the connection closed for `reason`.
    mutating func requestClose(_ reason: APNsConnectionCloseReason) -> Action {
        switch state {
        case .ready(let since):
            state = .closing(reason, readySince: since)
        case .draining(let readySince):
            state = .closing(reason, readySince: readySince)
        case .connecting:
            state = .closing(reason, readySince: nil)
        case .closing, .closed, .backingOff:
            return .none
        }
        return .close(reason)
    }

    /// The pool shuts down: close what is open, never reconnect.
    mutating func shutdown() -> Action {
        isShutDown = true
        switch state {
        case .backingOff, .closed:
            state = .closed
            return .none
        default:
            return requestClose(.shutdown)
        }
    }

    /// The connection reported itself closed (`lostReason` is its own text when the pool did not
    /// ask for it). Decides the reconnect delay; returns the close reason to log.
    mutating func closed(now: Int64, lostReason: String) -> APNsConnectionCloseReason {
        let reason: APNsConnectionCloseReason
        let readySince: Int64?
        switch state {
        case .closing(let requested, let since):
            reason = requested
            readySince = since
        case .connecting:
            reason = .connectFailed(lostReason)
            readySince = nil
        case .ready(let since), .draining(let since):
            reason = .lost(lostReason)
            readySince = since
        case .closed, .backingOff:
            return .lost(lostReason)
        }
        pingSentAt = nil
        suspectSince = nil
        zeroStreamLimitSince = nil
        if isShutDown {
            state = .closed
            return reason
        }
        // A connection that allowed no streams never served, however long it was up.
        let wasStable = reason != .noStreamsAllowed
            && readySince.map { now - $0 >= configuration.stableAfterNanoseconds } ?? false
        // A GOAWAY is graceful from a connection that served for a while. Soon after connecting
        // it is a server turning connections away (or one lost while draining), and reconnecting
        // must back off as after any failure: never a tight loop of handshakes.
        let isFailure = reason.isFailure || (reason == .goAway && !wasStable)
        if wasStable || !isFailure {
            consecutiveFailures = 0
        }
        if isFailure {
            consecutiveFailures += 1
        }
        let delay = configuration.reconnect.equalJitterNanoseconds(attempt: max(1, consecutiveFailures), jitter: jitter)
        state = .backingOff(until: now + delay)
        return reason
    }

    /// Time passes: reconnect when the backoff is over, PING when idle, give up on an
    /// unanswered PING or on a server that has allowed no streams for the whole timeout.
    mutating func tick(now: Int64) -> Action {
        switch state {
        case .backingOff(let until) where now >= until:
            state = .connecting(since: now)
            return .connect
        case .ready where zeroStreamLimitSince.map { now - $0 >= configuration.zeroStreamLimitTimeoutNanoseconds } == true:
            return requestClose(.noStreamsAllowed)
        case .ready, .draining:
            if let sentAt = pingSentAt {
                if now - sentAt >= configuration.pingTimeoutNanoseconds {
                    return requestClose(.pingTimeout)
                }
            } else if now - lastActivity >= configuration.pingIntervalNanoseconds {
                pingSentAt = now
                return .sendPing
            }
            return .none
        default:
            return .none
        }
    }

    /// When `tick` next has something to do, or nil.
    var nextDeadline: Int64? {
        switch state {
        case .backingOff(let until):
            return until
        case .ready, .draining:
            let ping = pingSentAt.map { $0 + configuration.pingTimeoutNanoseconds }
                ?? lastActivity + configuration.pingIntervalNanoseconds
            guard case .ready = state, let since = zeroStreamLimitSince else { return ping }
            return min(ping, since + configuration.zeroStreamLimitTimeoutNanoseconds)
        default:
            return nil
        }
    }
}
