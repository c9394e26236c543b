import HTTP2
import Observability
import Synchronization

/// The outcome of one notification as the connection pool saw it: an answer from APNs, or a
/// transport failure of its stream.
public enum APNsDeliveryResult: Sendable {
    /// APNs answered (any status).
    case response(APNsResponse)
    /// The stream failed before an answer arrived.
    case failure(HTTP2StreamFailure)
    /// Not sent: the notification's `expiration` had passed when its turn came.
    case expired
}

/// Receives the final answer for every notification given to an `APNsClient`.
///
/// - Important: called on the event loop thread of the connection that carried the notification;
///   implementations must be thread-safe and must not block.
public protocol APNsClientDelegate: AnyObject, Sendable {
    /// One notification is finished: `tag` is the value passed to `APNsClient.send`.
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

/// Where and how an `APNsClient` connects: one app's credentials against one APNs environment.
public struct APNsClientConfiguration: Sendable {
    /// Host name or IP literal of the APNs endpoint.
    public var host: String
    /// TCP port (443 for Apple).
    public var port: Int
    /// Number of HTTP/2 connections in the pool (at least 1).
    public var connections: Int
    /// Deadline of one stream; a stream without an answer by then fails with `.timeout`.
    public var requestTimeoutNanoseconds: UInt64
    /// Delay before reconnecting a lost connection; doubled per failure up to `maxReconnectDelayNanoseconds`.
    public var reconnectDelayNanoseconds: UInt64
    /// Upper bound of the reconnect delay.
    public var maxReconnectDelayNanoseconds: UInt64

    /// Creates a configuration with Apple's usual defaults for the timings.
    public init(
        host: String,
        port: Int,
        connections: Int,
        requestTimeoutNanoseconds: UInt64 = 10_000_000_000,
        reconnectDelayNanoseconds: UInt64 = 100_000_000,
        maxReconnectDelayNanoseconds: UInt64 = 30_000_000_000
    ) {
        self.host = host
        self.port = port
        self.connections = max(1, connections)
        self.requestTimeoutNanoseconds = requestTimeoutNanoseconds
        self.reconnectDelayNanoseconds = reconnectDelayNanoseconds
        self.maxReconnectDelayNanoseconds = maxReconnectDelayNanoseconds
    }
}

/// A pool of HTTP/2 connections to APNs for one app and environment.
///
/// Each connection lives on one event loop of the group (`APNsConnectionSlot`) and keeps its own
/// queue of notifications waiting for a stream; `send` spreads a batch over the slots with one
/// hop per slot, so the cost per notification is an array append. Slots obey the peer's
/// SETTINGS_MAX_CONCURRENT_STREAMS as it changes, re-queue streams the server refused (not
/// processed), and reconnect with exponential backoff.
public final class APNsClient: Sendable {
    /// The name in logs and metrics, e.g. `chat/production`.
    public let name: String
    /// The connections (internal for tests).
    let slots: [APNsConnectionSlot]
    private let nextSlot = Atomic<Int>(0)

    /// Creates the pool; call `start()` to connect.
    /// - Parameters:
    ///   - tokenProvider: the JWT source for token auth; nil for certificate auth.
    public init(
        name: String,
        configuration: APNsClientConfiguration,
        tls: TLSClientContext,
        group: EventLoopGroup,
        tokenProvider: APNsTokenProvider?,
        delegate: APNsClientDelegate
    ) {
        self.name = name
        var slots: [APNsConnectionSlot] = []
        for index in 0..<configuration.connections {
            slots.append(
                APNsConnectionSlot(
                    name: "\(name)#\(index)",
                    configuration: configuration,
                    tls: tls,
                    loop: group.next(),
                    tokenProvider: tokenProvider
                )
            )
        }
        self.slots = slots
        for slot in slots {
            slot.attach(client: self, delegate: delegate)
        }
    }

    /// Opens every connection of the pool.
    public func start() {
        for slot in slots {
            slot.loop.execute { slot.connect() }
        }
    }

    /// Queues notifications for sending; answers arrive at the delegate. Any thread.
    public func send(_ batch: [APNsPendingNotification]) {
        guard !batch.isEmpty else { return }
        let count = slots.count
        // `outstanding` is counted here, before the hop, so `queuedCount` includes the batch as
        // soon as `send` returns (the slot decrements it when each notification finishes).
        if count == 1 || batch.count == 1 {
            let slot = slots[nextSlot.add(1, ordering: .relaxed).oldValue % count]
            slot.outstanding.add(batch.count, ordering: .relaxed)
            slot.loop.execute { slot.enqueue(batch) }
            return
        }
        // Contiguous chunks, one hop per slot; the starting slot rotates between batches.
        let first = nextSlot.add(1, ordering: .relaxed).oldValue
        let chunk = (batch.count + count - 1) / count
        var start = 0
        var index = 0
        while start < batch.count {
            let end = min(start + chunk, batch.count)
            let part = Array(batch[start..<end])
            let slot = slots[(first + index) % count]
            slot.outstanding.add(part.count, ordering: .relaxed)
            slot.loop.execute { slot.enqueue(part) }
            start = end
            index += 1
        }
    }

    /// Closes every connection; queued and in-flight notifications finish with `.connectionLost`,
    /// and notifications sent afterwards finish the same way at once. Returns when every slot has
    /// closed. Call it before shutting down the event loop group (a stopped loop never answers).
    public func shutdown() {
        for slot in slots {
            slot.shutdown()
        }
    }

    /// Notifications accepted by `send` and not yet finished, over all connections.
    public var queuedCount: Int {
        slots.reduce(0) { $0 + $1.outstanding.load(ordering: .relaxed) }
    }
}
