import Dispatch
import HTTP2
import Observability
import Synchronization

/// One connection of an `APNsClient` pool and the notifications waiting for it.
///
/// - Important: every method except `shutdown()` and `outstanding` runs on `loop`; the slot's
///   mutable state is confined to that thread, which is why it is `@unchecked Sendable`.
final class APNsConnectionSlot: HTTP2ClientConnectionDelegate, @unchecked Sendable {
    let name: String
    let loop: EventLoop
    /// Notifications queued or in flight on this slot (read from any thread for metrics).
    /// `APNsClient.send` adds before handing a batch over; `finish` subtracts.
    let outstanding = Atomic<Int>(0)

    private let configuration: APNsClientConfiguration
    private let tls: TLSClientContext
    private let tokenProvider: APNsTokenProvider?
    private let logger = Logger(label: "apns.connection")
    private weak var client: APNsClient?
    private var delegate: APNsClientDelegate?

    private(set) var connection: HTTP2ClientConnection?
    private var queue: [APNsPendingNotification] = []
    private var queueHead = 0
    private var inFlight: [UInt64: APNsPendingNotification] = [:]
    private var nextStreamTag: UInt64 = 1
    private var reconnectDelay: UInt64
    private var reconnectScheduled = false
    private var isShuttingDown = false
    /// The most streams ever open at once on this slot's connections (loop thread; for tests).
    private(set) var peakActiveStreams = 0

    init(
        name: String,
        configuration: APNsClientConfiguration,
        tls: TLSClientContext,
        loop: EventLoop,
        tokenProvider: APNsTokenProvider?
    ) {
        self.name = name
        self.configuration = configuration
        self.tls = tls
        self.loop = loop
        self.tokenProvider = tokenProvider
        self.reconnectDelay = configuration.reconnectDelayNanoseconds
    }

    /// Whether the slot has a connection ready for streams (loop thread; for tests).
    var isConnected: Bool { connection?.isReady ?? false }

    /// Wires the slot to its pool; called once, before `connect()`.
    func attach(client: APNsClient, delegate: APNsClientDelegate) {
        self.client = client
        self.delegate = delegate
    }

    // MARK: - Loop-thread operations

    func connect() {
        reconnectScheduled = false
        guard !isShuttingDown, connection == nil else { return }
        let connection = HTTP2ClientConnection(
            host: configuration.host,
            port: configuration.port,
            tls: tls,
            loop: loop,
            delegate: self,
            streamTimeoutNanoseconds: configuration.requestTimeoutNanoseconds
        )
        self.connection = connection
        connection.start()
    }

    /// Takes a batch the caller has already counted in `outstanding`.
    func enqueue(_ batch: [APNsPendingNotification]) {
        if isShuttingDown {
            for item in batch {
                finish(item, .failure(.connectionLost("client is shutting down")))
            }
            return
        }
        queue.append(contentsOf: batch)
        pump(flush: true)
    }

    /// Moves queued notifications onto free streams. `flush` writes them out now; inside a
    /// connection callback the connection writes after its read pass, so no flush is needed.
    private func pump(flush: Bool) {
        // Runs after every finished stream: leave before signing when there is nothing to do.
        guard let connection, queueHead < queue.count, connection.availableStreams > 0 else { return }
        var submitted = false
        let authorization: String?
        do {
            authorization = try tokenProvider?.authorizationHeaderValue()
        } catch {
            logger.error("cannot sign a provider token", metadata: ["apns.connection": name, "error": "\(error)"])
            return
        }
        let nowSeconds = Timestamp.nowMilliseconds() / 1000
        while queueHead < queue.count, connection.availableStreams > 0 {
            let item = queue[queueHead]
            if let expiration = item.notification.expiration, expiration > 0, expiration <= nowSeconds {
                // Its `expiration` passed while it waited: not sent (contract §2).
                queueHead += 1
                finish(item, .expired)
                continue
            }
            let tag = nextStreamTag
            let request = item.notification.makeRequest(authorization: authorization)
            guard connection.submit(request, tag: tag) else { break }
            nextStreamTag &+= 1
            inFlight[tag] = item
            queueHead += 1
            submitted = true
        }
        compactQueue()
        peakActiveStreams = max(peakActiveStreams, connection.activeStreams)
        retireIfSpent(connection)
        if submitted && flush {
            connection.flush()
        }
    }

    /// A ready connection that may start no more streams (its stream ids are used up) is closed
    /// once its last stream finished; the slot then connects afresh.
    private func retireIfSpent(_ connection: HTTP2ClientConnection) {
        guard connection.isReady, !connection.canStartStreams, connection.activeStreams == 0 else { return }
        logger.info("replacing a connection whose stream ids are used up", metadata: ["apns.connection": name])
        connection.close()
    }

    private func compactQueue() {
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: queue.count < 65_536)
            queueHead = 0
        } else if queueHead > 4096 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    private func finish(_ item: APNsPendingNotification, _ result: APNsDeliveryResult) {
        outstanding.subtract(1, ordering: .relaxed)
        guard let client, let delegate else { return }
        delegate.apnsClient(client, didFinish: item.notification, tag: item.tag, result: result)
    }

    private func scheduleReconnect() {
        guard !isShuttingDown, !reconnectScheduled else { return }
        reconnectScheduled = true
        let delay = reconnectDelay
        let doubled = reconnectDelay.multipliedReportingOverflow(by: 2)
        reconnectDelay = doubled.overflow
            ? configuration.maxReconnectDelayNanoseconds
            : min(doubled.partialValue, configuration.maxReconnectDelayNanoseconds)
        // Jitter of up to a quarter of the delay spreads reconnects of many slots.
        let jitter = UInt64.random(in: 0...(delay / 4 + 1))
        let total = delay.addingReportingOverflow(jitter)
        loop.schedule(afterNanoseconds: total.overflow ? delay : total.partialValue) { [self] in connect() }
    }

    // MARK: - HTTP2ClientConnectionDelegate

    func connectionDidBecomeReady(_ connection: HTTP2ClientConnection) {
        reconnectDelay = configuration.reconnectDelayNanoseconds
        logger.debug("connection ready", metadata: ["apns.connection": name])
        pump(flush: true)
    }

    func connection(
        _ connection: HTTP2ClientConnection,
        didFinishStream tag: UInt64,
        result: Result<HTTP2Response, HTTP2StreamFailure>
    ) {
        guard let item = inFlight.removeValue(forKey: tag) else { return }
        switch result {
        case .success(let response):
            finish(item, .response(APNsResponse(response)))
        case .failure(.refused) where !isShuttingDown:
            // Not processed by the server: safe to send again on the next connection.
            queue.append(item)
        case .failure(let failure):
            finish(item, .failure(failure))
        }
        pump(flush: false)
        if let current = self.connection {
            retireIfSpent(current)
        }
    }

    func connectionDidUpdateSettings(_ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {
        pump(flush: false)
    }

    func connectionDidClose(_ connection: HTTP2ClientConnection, reason: String) {
        guard self.connection === connection else { return }
        self.connection = nil
        if isShuttingDown {
            failQueued(reason: reason)
            return
        }
        logger.warning("connection closed", metadata: ["apns.connection": name, "reason": reason])
        scheduleReconnect()
    }

    private func failQueued(reason: String) {
        let waiting = queue[queueHead...]
        queue.removeAll()
        queueHead = 0
        for item in waiting {
            finish(item, .failure(.connectionLost(reason)))
        }
    }

    // MARK: - Shutdown (any thread)

    /// Closes the connection and fails whatever is still queued; returns when the loop has done so.
    ///
    /// On the slot's own loop thread (e.g. from a delegate callback) it runs inline instead of
    /// waiting for the loop, which would never come back.
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

    /// Loop thread. Outside an nghttp2 callback `close()` finishes the open streams and calls
    /// `connectionDidClose` before it returns; inside one the connection closes right after it.
    private func closeForShutdown() {
        isShuttingDown = true
        connection?.close()
        failQueued(reason: "client is shutting down")
    }
}
