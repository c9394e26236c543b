import HTTP2
import Observability
import Synchronization

/// Receives what happens to the notifications given to an `APNsClient`.
///
/// - Important: called on the pool's event loop thread; implementations must be thread-safe and
///   must not block.
public protocol APNsClientDelegate: AnyObject, Sendable {
    /// Final answer for one notification (after retries): `tag` is the value passed to
    /// `APNsClient.send`; `result` carries the attempts APNs saw and the last answer.
    func apnsClient(_ client: APNsClient, didFinish notification: APNsNotification, tag: UInt64, result: APNsDeliveryResult)
}

/// A notification waiting for a stream, with the caller's tag.
public struct APNsPendingNotification: Sendable {
    /// What to send.
    public var notification: APNsNotification
    /// Opaque value handed back to the delegate with the answer.
    public var tag: UInt64

    /// Pairs a notification with its tag.
    public init(notification: APNsNotification, tag: UInt64) {
        self.notification = notification
        self.tag = tag
    }
}

/// Where and how an `APNsClient` connects and retries: one app's credentials against one APNs
/// environment.
public struct APNsClientConfiguration: Sendable {
    /// Host name or IP literal of the APNs endpoint.
    public var host: String
    /// TCP port (443 for Apple).
    public var port: Int
    /// Number of HTTP/2 connections in the pool (at least 1).
    public var connections: Int
    /// Deadline of one stream; a stream without an answer by then fails with `.timeout` (retried).
    public var requestTimeoutNanoseconds: UInt64
    /// First reconnect delay ceiling; doubled per failed connection up to `maxReconnectDelayNanoseconds`.
    public var reconnectDelayNanoseconds: UInt64
    /// Upper bound of the reconnect delay.
    public var maxReconnectDelayNanoseconds: UInt64
    /// Idle time (no frame received) after which a PING is sent (`apns.ping_interval`).
    public var pingInterval: Duration
    /// How long a PING may go unacknowledged before the connection is replaced (`apns.ping_timeout`).
    public var pingTimeout: Duration
    /// Requests APNs may see per notification, the first included (`apns.retry.max_attempts`).
    public var maxAttempts: Int
    /// First retry backoff ceiling (`apns.retry.initial_backoff`).
    public var initialBackoff: Duration
    /// Largest retry backoff ceiling (`apns.retry.max_backoff`).
    public var maxBackoff: Duration

    /// Creates a configuration with the contract's defaults for the timings.
    public init(
        host: String,
        port: Int,
        connections: Int,
        requestTimeoutNanoseconds: UInt64 = 10_000_000_000,
        reconnectDelayNanoseconds: UInt64 = 100_000_000,
        maxReconnectDelayNanoseconds: UInt64 = 30_000_000_000,
        pingInterval: Duration = .seconds(60),
        pingTimeout: Duration = .seconds(10),
        maxAttempts: Int = 5,
        initialBackoff: Duration = .milliseconds(100),
        maxBackoff: Duration = .seconds(30)
    ) {
        self.host = host
        self.port = port
        self.connections = max(1, connections)
        self.requestTimeoutNanoseconds = requestTimeoutNanoseconds
        self.reconnectDelayNanoseconds = reconnectDelayNanoseconds
        self.maxReconnectDelayNanoseconds = maxReconnectDelayNanoseconds
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
    }
}

/// A pool of HTTP/2 connections to APNs for one app and environment.
///
/// The pool and all its connections live on one event loop (the group spreads pools over its
/// loops): its one queue, routing, in-flight streams, retries and timers are confined to that
/// thread, so no lock is taken per notification. `send` hands a batch over with one hop.
/// Work goes to whichever connection is ready and has stream room; a connection that is
/// connecting, backing off, draining or full holds nothing. See `APNsConnectionPool`.
public final class APNsClient: Sendable {
    /// The name in logs and metrics, e.g. `chat/production`.
    public let name: String
    /// The pool (internal for tests).
    let pool: APNsConnectionPool

    /// Creates the pool; call `start()` to connect.
    /// - Parameters:
    ///   - delegate: receives the answers; not retained (its owner, typically the owner of the
    ///     client too, keeps it alive).
    ///   - observer: told of every answer and retry (metrics); retained, so it must not own the client.
    ///   - tokenProvider: the JWT source for token auth; nil for certificate auth.
    ///   - clock: the time source of the pool's state machines.
    ///   - jitter: the randomness of backoffs.
    public init(
        name: String,
        configuration: APNsClientConfiguration,
        tls: TLSClientContext,
        group: EventLoopGroup,
        tokenProvider: APNsTokenProvider?,
        delegate: APNsClientDelegate,
        observer: APNsClientObserver? = nil,
        clock: any APNsClock = APNsSystemClock(),
        jitter: APNsJitterSource = .system
    ) {
        self.name = name
        self.pool = APNsConnectionPool(
            name: name, configuration: configuration, tls: tls, loop: group.next(),
            tokenProvider: tokenProvider, observer: observer, clock: clock, jitter: jitter
        )
        pool.attach(client: self, delegate: delegate)
    }

    /// Opens every connection of the pool.
    public func start() {
        let pool = self.pool
        pool.loop.execute { pool.start() }
    }

    /// Queues notifications for sending; answers arrive at the delegate. Any thread; one hop to
    /// the pool's loop per batch.
    ///
    /// The batch moves to the loop: passed as its last use (`send(consume batch)`), its
    /// notifications reach the pool's queue without a copy (a copy would retain each of their
    /// strings and arrays, and dropping the batch would release them again).
    public func send(_ batch: consuming [APNsPendingNotification]) {
        guard !batch.isEmpty else { return }
        let pool = self.pool
        // Counted before the hop, so `queuedCount` includes the batch as soon as `send` returns.
        pool.outstanding.add(batch.count, ordering: .relaxed)
        let handoff = BatchHandoff(batch)
        pool.loop.execute { pool.enqueue(handoff.take()) }
    }

    /// Closes every connection; queued, retrying and in-flight notifications finish with
    /// `.connectionLost`, and notifications sent afterwards finish the same way at once. Returns
    /// when the pool has closed. Call it before shutting down the event loop group.
    public func shutdown() {
        pool.shutdown()
    }

    /// Notifications accepted by `send` and not yet finished (queued, in flight, or waiting to retry).
    public var queuedCount: Int {
        pool.outstanding.load(ordering: .relaxed)
    }

    /// How many of the pool's connections are in each state. Any thread.
    public var connectionStates: [APNsConnectionStateName: Int] {
        pool.stateCounts.withLock { $0 }
    }

    /// Whether at least one connection can take streams now (for `/readyz`). Any thread.
    public var hasReadyConnection: Bool {
        pool.stateCounts.withLock { ($0[.ready] ?? 0) > 0 }
    }

    /// Whether APNs cannot be reached: no connection is ready and opening one keeps failing
    /// (refused, unreachable, a failed TLS handshake, or turned away right after connecting).
    /// Any thread; no lock.
    public var isUnreachable: Bool {
        pool.unreachable.load(ordering: .relaxed)
    }
}

/// Carries one batch from `APNsClient.send` to the pool's loop, so that the loop takes the only
/// reference to the batch's storage and can move the notifications out of it.
///
/// `@unchecked Sendable`: written once on the sending thread before the hop and read once on
/// the loop after it; the loop's task queue (a lock) orders the two.
private final class BatchHandoff: @unchecked Sendable {
    private var batch: [APNsPendingNotification]

    init(_ batch: consuming [APNsPendingNotification]) {
        self.batch = batch
    }

    /// The batch, leaving nothing behind (so the caller holds its storage alone).
    func take() -> [APNsPendingNotification] {
        var taken: [APNsPendingNotification] = []
        swap(&taken, &batch)
        return taken
    }
}
