import Kafka
import APNs
import HTTP2
import Observability
import Synchronization

/// Turns decoded push requests into notifications on the right APNs connection pool, and every
/// answer into a result record.
///
/// One pool per app and environment, made at start for each app's configured environment and on
/// first use for a request that overrides it. `dispatch` runs on the consumer thread; answers
/// arrive on the event loop threads.
final class NotificationDispatcher: APNsClientDelegate, @unchecked Sendable {
    private struct PoolKey: Hashable {
        var app: String
        var environment: PushEnvironment
    }

    let configuration: BridgeConfiguration
    /// Where APNs answers, retries and connection states are counted (nil for `apns-bridge send`).
    let metrics: BridgeMetrics?
    private let group: EventLoopGroup
    private let publisher: ResultSink
    private let credentials: [String: AppCredentials]
    private let logger = Logger(label: "bridge.dispatcher")
    /// Consumer-thread only (created in `start`/`dispatch`, read in `shutdown` after the consumer stopped).
    private var pools: [PoolKey: APNsClient] = [:]
    /// Consumer-thread only: the pools of every app's configured environment (made in `start`).
    private var configuredPools: Set<PoolKey> = []
    /// Consumer-thread only: notifications dispatched since the last `flush()`, by pool (a short
    /// list searched linearly: a poll rarely touches more than a few pools, and this saves
    /// hashing the app name for every request). No runtime exclusivity check (three per
    /// request): no access to it calls out to code that could touch it.
    @exclusivity(unchecked) private var pending: [(key: PoolKey, pool: APNsClient, batch: [APNsPendingNotification])] = []
    private let inFlightCount = Atomic<Int>(0)
    /// Every pool made so far with its app, for readers on other threads (`/metrics`, `/readyz`).
    let poolDirectory = Locked<[(app: String, environment: PushEnvironment, client: APNsClient)]>([])
    private let abandoning = Atomic<Bool>(false)

    /// Takes every app's credentials from `loadCredentials(_:)`, or loads them when none are given.
    init(configuration: BridgeConfiguration, credentials: [String: AppCredentials]? = nil,
         group: EventLoopGroup, publisher: ResultSink, metrics: BridgeMetrics? = nil) throws(PipelineError) {
        self.configuration = configuration.removingPassphrases()
        self.metrics = metrics
        self.group = group
        self.publisher = publisher
        if let credentials {
            self.credentials = credentials
        } else {
            self.credentials = try Self.loadCredentials(configuration)
        }
    }

    /// Loads every app's credentials (key files, certificates, passphrases); throws a
    /// `PipelineError` naming the app when one is unusable.
    static func loadCredentials(_ configuration: BridgeConfiguration) throws(PipelineError) -> [String: AppCredentials] {
        if let caFile = configuration.apns.caFile {
            // Named by its own key, as `check` names it, before each app's TLS context reads it.
            do {
                _ = try CertificateInspector.pemCertificates(file: caFile)
            } catch {
                throw PipelineError(component: "apns.ca_file", message: "\(error)")
            }
        }
        var credentials: [String: AppCredentials] = [:]
        var tokenProviders: [String: APNsTokenProvider] = [:]   // one JWT per key, shared by its apps
        for app in configuration.apps {
            credentials[app.name] = try AppCredentials(app: app, caFile: configuration.apns.caFile,
                                                       tokenProviders: &tokenProviders)
        }
        return credentials
    }

    /// Notifications handed to APNs pools and not finished yet.
    var inFlight: Int { inFlightCount.load(ordering: .relaxed) }

    /// Consumer thread: whether no APNs endpoint in use can be reached, so that nothing fetched
    /// now could be sent. In use: every app's configured environment, and another environment
    /// while it holds notifications (a request's override; idle, it would hide an outage). One
    /// endpoint down while another works does not count: fetching goes on for the other, bounded
    /// by `limits.max_in_flight`.
    var everyEndpointUnreachable: Bool {
        var inUse = false
        for (key, pool) in pools where configuredPools.contains(key) || pool.queuedCount > 0 {
            guard pool.isUnreachable else { return false }
            inUse = true
        }
        return inUse
    }

    /// Opens the pools of every app's configured environment.
    func start() {
        for app in configuration.apps {
            _ = pool(app: app.name, environment: app.environment)
            configuredPools.insert(PoolKey(app: app.name, environment: app.environment))
        }
    }

    /// From now on a notification that ends without an answer from APNs (the pools are being
    /// closed) publishes nothing and keeps its hold: its input offset stays uncommitted and a
    /// restart sends it again, instead of reporting a push as `failed` that was never tried.
    func abandonUnanswered() {
        abandoning.store(true, ordering: .releasing)
    }

    /// Closes every pool; what is still queued or in flight finishes without an answer. The pools
    /// are released: their connections hold this dispatcher as their delegate, so keeping them
    /// would make a cycle that outlives the pipeline.
    func shutdown() {
        for pool in pools.values {
            pool.shutdown()
        }
        pools.removeAll()
        poolDirectory.withLock { $0.removeAll() }  // the pools hold this dispatcher as their delegate
    }

    private func pool(app: String, environment: PushEnvironment) -> APNsClient? {
        let key = PoolKey(app: app, environment: environment)
        if let pool = pools[key] { return pool }
        guard let credentials = credentials[app], let settings = configuration.apps.first(where: { $0.name == app }) else {
            return nil
        }
        let endpoint = configuration.apns.endpoint(for: environment)
        let name = "\(app)/\(environment.rawValue)"
        let pool = APNsClient(
            name: name,
            configuration: APNsClientConfiguration(
                host: endpoint.host,
                port: endpoint.port,
                connections: settings.connections,
                requestTimeoutNanoseconds: configuration.apns.requestTimeout.totalNanoseconds,
                pingInterval: configuration.apns.pingInterval,
                pingTimeout: configuration.apns.pingTimeout,
                maxAttempts: configuration.apns.retry.maxAttempts,
                initialBackoff: configuration.apns.retry.initialBackoff,
                maxBackoff: configuration.apns.retry.maxBackoff
            ),
            tls: credentials.tls,
            group: group,
            tokenProvider: credentials.tokenProvider,
            delegate: self,
            observer: metrics?.poolObserver(pool: name)
        )
        pools[key] = pool
        poolDirectory.withLock { $0.append((app: app, environment: environment, client: pool)) }
        pool.start()
        return pool
    }

    /// Consumer thread: publishes `invalid` results at once and collects the rest for the next
    /// `flush()`. (Expiration is checked by the pool when a notification's turn to be sent comes.)
    func dispatch(_ request: PushRequest, context: RequestContext) {
        // The clock is read only for results decided here; most requests have none.
        if !request.invalidTokens.isEmpty {
            let now = Timestamp.nowMilliseconds()
            for token in request.invalidTokens {
                publishLocal(token: InvalidTokenEcho.echoed(token), outcome: .invalid, reason: "BadDeviceToken",
                             request: request, context: context, now: now)
            }
        }
        guard !request.validTokens.isEmpty else { return }
        let key = PoolKey(app: request.app, environment: request.environment)
        var index = pending.firstIndex { $0.key == key }
        if index == nil, let pool = pool(app: request.app, environment: request.environment) {
            pending.append((key: key, pool: pool, batch: []))
            index = pending.count - 1
        }
        guard let index else {
            // The decoder only accepts configured apps, so this is unreachable in practice.
            let now = Timestamp.nowMilliseconds()
            for token in request.validTokens {
                publishLocal(token: token, outcome: .failed, reason: "UnknownApp", request: request, context: context, now: now)
            }
            return
        }
        // No exact `reserveCapacity` here: it would reallocate (and copy) the poll's whole batch
        // for every request, quadratic in the requests of a poll; appends grow it geometrically.
        var batch: [APNsPendingNotification] = []
        swap(&batch, &pending[index].batch)
        for token in request.validTokens {
            let notification = APNsNotification(
                token: token, pushType: request.pushType, priority: request.priority, expiration: request.expiration,
                collapseID: request.collapseID, topic: request.topic, apnsID: request.apnsID, payload: request.payload
            )
            context.retain()
            batch.append(APNsPendingNotification(notification: notification, tag: context.retainedTag()))
        }
        inFlightCount.add(request.validTokens.count, ordering: .relaxed)
        swap(&batch, &pending[index].batch)
    }

    /// Consumer thread: hands everything `dispatch` collected to the pools, one batch per pool,
    /// so a poll's worth of requests costs each event loop one wake-up. Call after each poll.
    func flush() {
        guard !pending.isEmpty else { return }
        for index in pending.indices {
            // Moved out, so the pool's loop holds the batch alone (see `APNsClient.send`).
            var batch: [APNsPendingNotification] = []
            swap(&batch, &pending[index].batch)
            pending[index].pool.send(consume batch)
        }
        pending.removeAll(keepingCapacity: true)
    }

    // MARK: - APNsClientDelegate (event loop threads)

    func apnsClient(_ client: APNsClient, didFinish notification: APNsNotification, tag: UInt64, result: APNsDeliveryResult) {
        let context = RequestContext.fromTag(tag)
        inFlightCount.subtract(1, ordering: .relaxed)
        if case .failure = result.outcome, abandoning.load(ordering: .acquiring) {
            return  // the hold stays: see abandonUnanswered()
        }
        var invalidToken: InvalidTokenRecord?
        let pushResult = APNsAnswerInterpreter.interpret(result, notification: notification, context: context,
                                                         invalidToken: &invalidToken)
        if pushResult.outcome != .delivered, logger.isEnabled(.debug) {
            logger.debug("notification not delivered", metadata: [
                "apns.token": Redact.token(notification.token), "bridge.outcome": pushResult.outcome.rawValue,
                "apns.reason": pushResult.reason ?? "", "bridge.request_id": context.requestID,
            ])
        }
        publisher.publishResult(pushResult, context: context)
        if let invalidToken {
            publisher.publishInvalidToken(invalidToken, context: context)
        }
        context.release()
    }

    /// Publishes a result decided without asking APNs (`invalid`, `expired`).
    private func publishLocal(token: String, outcome: PushOutcome, reason: String, request: PushRequest,
                              context: RequestContext, now: Int64) {
        let result = PushResult(
            requestID: context.requestID, app: context.app, token: token, outcome: outcome, reason: reason, attempts: 0,
            latencyMilliseconds: RecordTimestamp.latencyMilliseconds(from: context.startedAtMilliseconds, nowMicroseconds: now * 1000),
            source: context.source,
            completedAtMilliseconds: now
        )
        publisher.publishResult(result, context: context)
        if outcome == .invalid {
            publisher.publishInvalidToken(
                InvalidTokenRecord(
                    token: token, app: request.app, topic: request.topic, environment: request.environment,
                    reason: reason, unregisteredAt: nil, requestID: request.id, observedAtMilliseconds: now
                ),
                context: context
            )
        }
    }
}
