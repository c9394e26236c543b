import Dispatch
import HTTP2
import Observability
import Synchronization

/// The working part of an `APNsClient`: one queue, its connections, retries and timers, all on
/// one event loop.
///
/// Decisions are made by value-type state machines (`APNsDeliveryStateMachine` for the
/// notifications, one `APNsConnectionStateMachine` per connection); this class performs their
/// actions (connect, submit, PING, close, finish) and keeps one timer, armed for the earliest
/// deadline any of them reports.
///
/// - Important: every method except `shutdown()`, `outstanding` and `stateCounts` runs on `loop`
///   and checks it (`preconditionInEventLoop`); that confinement is why it is
///   `@unchecked Sendable`.
final class APNsConnectionPool: @unchecked Sendable {
    /// One connection slot of the pool: its state machine and its current HTTP/2 connection.
    final class Member: HTTP2ClientConnectionDelegate {
        let index: Int
        var machine: APNsConnectionStateMachine
        var connection: HTTP2ClientConnection?
        /// The most streams ever open at once on this member's connections (for tests).
        var peakActiveStreams = 0
        /// Streams were submitted during this pump: flush once at its end.
        var needsFlush = false
        /// The provider token this member's connection sends (token auth): kept per connection,
        /// since APNs refuses a connection that changes tokens within 20 minutes. Nil until the
        /// connection's first stream; a new connection starts without one.
        var authorization: APNsTokenProvider.Authorization?
        /// Weak: a pool dropped without `shutdown()` must not be kept alive by its connections.
        weak var pool: APNsConnectionPool?

        init(index: Int, machine: APNsConnectionStateMachine, pool: APNsConnectionPool) {
            self.index = index
            self.machine = machine
            self.pool = pool
        }

        /// Streams this member can take now.
        var room: Int {
            guard machine.acceptsStreams, let connection else { return 0 }
            return connection.availableStreams
        }

        func connectionDidBecomeReady(_ connection: HTTP2ClientConnection) {
            pool?.memberBecameReady(self, connection)
        }

        func connection(_ connection: HTTP2ClientConnection, didFinishStream tag: UInt64,
                        result: Result<HTTP2Response, HTTP2StreamFailure>) {
            pool?.streamFinished(self, connection, tag: tag, result: result)
        }

        func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {
            pool?.settingsChanged(self, connection, maxConcurrentStreams: maxConcurrentStreams)
        }

        func connectionDidReceivePingAcknowledgement(_ connection: HTTP2ClientConnection) {
            pool?.pingAcknowledged(self, connection)
        }

        func connectionDidReceiveGoAway(_ connection: HTTP2ClientConnection) {
            pool?.goAwayReceived(self, connection)
        }

        func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String) {
            pool?.memberClosed(self, connection, reason: reason)
        }
    }

    /// A notification on a stream.
    struct InFlight {
        var entry: APNsDeliveryStateMachine.Entry
        var sentAt: Int64
        var tokenGeneration: UInt64?
    }

    /// What is read of an APNs answer body: error bodies are a few dozen bytes of JSON, so 16 KiB
    /// is ample; past it the stream is reset and the answer keeps the first 16 KiB (not being
    /// JSON, they yield no `reason`), never buffered.
    static let maxResponseBodyBytes = 16 * 1024

    let name: String
    let loop: EventLoop
    /// Notifications accepted and not finished (any thread; `send` adds, `finish` subtracts).
    let outstanding = Atomic<Int>(0)
    /// Connections per state, refreshed on every state change (any thread).
    let stateCounts = Locked<[APNsConnectionStateName: Int]>([.closed: 0])
    /// No connection ready and the attempts to open one failing (any thread; `refreshStateCounts`).
    let unreachable = Atomic<Bool>(false)
    /// Consecutive failures of one connection after which, with none ready, the endpoint counts
    /// as unreachable.
    static let failuresMakingUnreachable = 2

    let configuration: APNsClientConfiguration
    let tls: TLSClientContext
    let tokenProvider: APNsTokenProvider?
    let clock: any APNsClock
    let logger = Logger(label: "apns.pool")
    private weak var client: APNsClient?
    /// Weak: the delegate usually owns the client (a pipeline and its pools); no cycle.
    private weak var delegate: APNsClientDelegate?
    /// Strong and constant: told of every answer without a weak load or a retain.
    let observer: APNsClientObserver?

    // No runtime exclusivity checks on the three state machines and tables the pump and every
    // finished stream touch: loop thread only, and no access to them calls out (the delegate is
    // told after they changed).
    @exclusivity(unchecked) var delivery: APNsDeliveryStateMachine
    var members: [Member] = []
    @exclusivity(unchecked) var inFlight = APNsInFlightTable()
    private var rotation = 0
    private var timer: EventLoopTimer?
    private var timerDeadline: Int64?
    private(set) var isShuttingDown = false
    @exclusivity(unchecked) private var finishedScratch: [(APNsDeliveryStateMachine.Entry, APNsDeliveryResult)] = []
    /// A pump is due at the end of this loop iteration (`schedulePump`).
    private var pumpScheduled = false

    init(name: String, configuration: APNsClientConfiguration, tls: TLSClientContext, loop: EventLoop,
         tokenProvider: APNsTokenProvider?, observer: APNsClientObserver?, clock: any APNsClock,
         jitter: APNsJitterSource) {
        self.name = name
        self.observer = observer
        self.configuration = configuration
        self.tls = tls
        self.loop = loop
        self.tokenProvider = tokenProvider
        self.clock = clock
        self.delivery = APNsDeliveryStateMachine(
            configuration: .init(
                maxAttempts: configuration.maxAttempts,
                retryBackoff: APNsBackoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
            ),
            jitter: jitter
        )
        let connectionConfiguration = APNsConnectionStateMachine.Configuration(
            pingIntervalNanoseconds: max(configuration.pingInterval.nanosecondsClamped, 1_000_000),
            pingTimeoutNanoseconds: max(configuration.pingTimeout.nanosecondsClamped, 1_000_000),
            reconnect: APNsBackoff(
                initial: .nanoseconds(Int64(clamping: configuration.reconnectDelayNanoseconds)),
                maximum: .nanoseconds(Int64(clamping: configuration.maxReconnectDelayNanoseconds))
            ),
            zeroStreamLimitTimeoutNanoseconds: max(Int64(clamping: configuration.requestTimeoutNanoseconds), 1_000_000)
        )
        for index in 0..<configuration.connections {
            members.append(Member(
                index: index,
                machine: APNsConnectionStateMachine(configuration: connectionConfiguration, jitter: jitter),
                pool: self
            ))
        }
        stateCounts.withLock { $0 = [.closed: configuration.connections] }
    }

    /// Wires the pool to its client; called once, before `start()`. The delegate is not retained:
    /// its owner keeps it alive as long as it wants answers.
    func attach(client: APNsClient, delegate: APNsClientDelegate) {
        self.client = client
        self.delegate = delegate
    }

    // MARK: - Loop-thread operations

    /// Opens every connection.
    func start() {
        loop.preconditionInEventLoop()
        let now = clock.now().nanoseconds
        for member in members {
            perform(member.machine.start(now: now), on: member)
        }
        refreshStateCounts()
    }

    /// Takes a batch the caller has already counted in `outstanding`.
    func enqueue(_ batch: consuming [APNsPendingNotification]) {
        loop.preconditionInEventLoop()
        if isShuttingDown {
            for pending in batch {
                finish(APNsDeliveryStateMachine.Entry(pending),
                       APNsDeliveryResult(outcome: .failure(.connectionLost(APNsDeliveryStateMachine.shutdownReason)), attempts: 0))
            }
            return
        }
        delivery.enqueue(batch, now: clock.now().nanoseconds)
        pump()
        rearmTimer()
    }

    /// Moves queued notifications onto connections with stream room, spread evenly over them.
    func pump() {
        loop.preconditionInEventLoop()
        guard delivery.queuedCount > 0, members.contains(where: { $0.room > 0 }) else { return }
        let now = clock.now()
        var signingFailed = false
        while delivery.queuedCount > 0, !signingFailed {
            var open = 0
            for member in members where member.room > 0 { open += 1 }
            guard open > 0 else { break }
            let share = max(1, (delivery.queuedCount + open - 1) / open)
            var submitted = 0
            rotation &+= 1
            for offset in 0..<members.count {
                let member = members[(rotation &+ offset) % members.count]
                guard member.room > 0, !signingFailed else { continue }
                let count = submit(upTo: share, on: member, now: now, signingFailed: &signingFailed)
                if count > 0 { member.needsFlush = true }
                submitted += count
            }
            if submitted == 0 { break }
        }
        for member in members where member.needsFlush {
            member.needsFlush = false
            member.connection?.flush()
        }
        reportFinished()
    }

    /// Pumps (and re-arms the timer) once at the end of this loop iteration: the streams that
    /// finish in one read of the socket are replaced by one pump, whose submissions go out in
    /// one write, instead of a pump (token lookup, member scan, flush) per finished stream.
    func schedulePump() {
        loop.preconditionInEventLoop()
        guard !pumpScheduled else { return }
        pumpScheduled = true
        loop.scheduleFlush(self)
    }

    /// Submits up to `limit` queued notifications on `member`'s connection; returns how many.
    /// With token auth, the connection's token is looked up once, when its first stream of this
    /// pump is about to go out: a connection holds a token from the time it sends one, so that
    /// the 20 minutes it keeps it count from its first use. A token that cannot be signed sets
    /// `signingFailed` (logged) and puts the notification back.
    private func submit(upTo limit: Int, on member: Member, now: APNsInstant, signingFailed: inout Bool) -> Int {
        guard let connection = member.connection else { return 0 }
        var authorization = member.authorization
        var tokenChecked = tokenProvider == nil
        var count = 0
        while count < limit, member.room > 0,
              let entry = delivery.nextToSend(now: now, finished: &finishedScratch) {
            if !tokenChecked, let tokenProvider {
                do {
                    authorization = try tokenProvider.authorization(keeping: member.authorization)
                    member.authorization = authorization
                    // The token is the same for every request until it is replaced: encoded
                    // once per connection and token, not per request.
                    connection.encodeOnce("authorization", value: authorization?.headerValue)
                    tokenChecked = true
                } catch {
                    logger.error("cannot sign a provider token", metadata: ["apns.pool": name, "error": "\(error)"])
                    delivery.putBack(entry)
                    signingFailed = true
                    break
                }
            }
            let tag = inFlight.nextTag
            guard Self.submit(entry, on: connection, tag: tag, authorization: authorization?.headerValue) else {
                delivery.putBack(entry)
                break
            }
            let stored = inFlight.insert(InFlight(entry: entry, sentAt: now.nanoseconds, tokenGeneration: authorization?.generation))
            // invariant: nothing ran on this loop between `nextTag` and `insert` (the submit
            // calls no delegate), so the stream carries the tag its notification is stored under.
            precondition(stored == tag, "APNs pool: in-flight tag changed between nextTag and insert")
            count += 1
        }
        member.peakActiveStreams = max(member.peakActiveStreams, connection.activeStreams)
        return count
    }

    /// Puts `entry`'s notification on a new stream of `connection`. Borrowing the entry here
    /// spares the copy of the notification the compiler made for the call in the loop above.
    private static func submit(_ entry: borrowing APNsDeliveryStateMachine.Entry, on connection: HTTP2ClientConnection,
                               tag: UInt64, authorization: String?) -> Bool {
        entry.pending.notification.submit(on: connection, tag: tag, authorization: authorization)
    }

    /// Reports notifications the state machines finished on the way (expired while waiting).
    private func reportFinished() {
        guard !finishedScratch.isEmpty else { return }
        let finished = finishedScratch
        finishedScratch.removeAll(keepingCapacity: true)
        for (entry, result) in finished {
            finish(entry, result)
        }
    }

    func finish(_ entry: APNsDeliveryStateMachine.Entry, _ result: APNsDeliveryResult) {
        outstanding.subtract(1, ordering: .relaxed)
        guard let client, let delegate else { return }
        delegate.apnsClient(client, didFinish: entry.pending.notification, tag: entry.pending.tag, result: result)
    }

    // MARK: - The one timer

    /// Arms the pool's timer for the earliest deadline of its state machines (keeps an earlier
    /// one: it fires, does what is due, and re-arms).
    func rearmTimer() {
        loop.preconditionInEventLoop()
        guard !isShuttingDown else { return }
        var deadline = delivery.nextDeadline
        for member in members {
            if let next = member.machine.nextDeadline {
                deadline = min(deadline ?? next, next)
            }
        }
        guard let deadline else { return }
        if let scheduled = timerDeadline, scheduled <= deadline, timer != nil { return }
        if let timer { loop.cancel(timer) }
        let delay = max(0, deadline - clock.now().nanoseconds)
        timerDeadline = deadline
        timer = loop.schedule(afterNanoseconds: UInt64(delay)) { [weak self] in self?.timerFired() }
    }

    private func timerFired() {
        loop.preconditionInEventLoop()
        timer = nil
        timerDeadline = nil
        guard !isShuttingDown else { return }
        let now = clock.now()
        finishedScratch.append(contentsOf: delivery.tick(now: now))
        for member in members {
            if let age = member.connection?.nanosecondsSinceLastFrame() {
                member.machine.receivedTraffic(at: now.nanoseconds &- Int64(clamping: age))
            }
            perform(member.machine.tick(now: now.nanoseconds), on: member)
        }
        refreshStateCounts()
        pump()
        reportFinished()
        rearmTimer()
    }

    // MARK: - Shutdown (any thread)

    /// Closes every connection and fails whatever is still here; returns when the loop has done so.
    /// On the pool's own loop thread (e.g. from a delegate callback) it runs inline.
    func shutdown() {
        if loop.inEventLoop {
            closeForShutdown()
            return
        }
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            closeForShutdown()
            done.signal()
        }
        done.wait()
    }

    private func closeForShutdown() {
        loop.preconditionInEventLoop()
        guard !isShuttingDown else { return }
        isShuttingDown = true
        if let timer { loop.cancel(timer) }
        timer = nil
        for member in members {
            perform(member.machine.shutdown(), on: member)
        }
        for entry in delivery.removeAll() {
            finish(entry, APNsDeliveryResult(outcome: .failure(.connectionLost(APNsDeliveryStateMachine.shutdownReason)),
                                             attempts: entry.attempts))
        }
        refreshStateCounts()
    }
}

extension APNsConnectionPool: EventLoopFlushable {
    /// The pump `schedulePump` asked for.
    func flushAtEndOfIteration() {
        pumpScheduled = false
        pump()
        rearmTimer()
    }
}
