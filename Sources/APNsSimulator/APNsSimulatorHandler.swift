import APNs
import HTTP2
import Observability

/// Bridges the HTTP/2 server to the rules and the faults: one call per stream on the
/// connection's loop thread. Per-connection state (authentication, token switches) lives with
/// the connection (`HTTP2ServerConnection.handlerState`).
///
/// Order per stream: count it; drop / half-open / GOAWAY by the connection's stream count; stall;
/// the rules' answer (token limits from the faults; the first request that passes authentication
/// raises the connection's initial stream limit); an injected failure instead of a 200; then
/// the answer, after `latency` on a loop timer.
final class APNsSimulatorHandler: HTTP2ServerHandler, HTTP2ServerObserver, @unchecked Sendable {
    // @unchecked: immutable references to thread-safe objects (rules, Locked state, the
    // statistics recorder); per-connection state is confined to the connection's loop.
    private let rules: APNsSimulatorRules
    private let answerOverride: APNsSimulator.AnswerOverride?
    private let faults: Locked<APNsSimulatorFaults>
    private let statistics: Locked<APNsSimulatorStatistics>

    /// Authentication state of one connection (loop thread only).
    private final class ConnectionState {
        var auth: APNsConnectionAuthState

        init(auth: APNsConnectionAuthState) {
            self.auth = auth
        }
    }

    init(rules: APNsSimulatorRules, faults: APNsSimulatorFaults, answerOverride: APNsSimulator.AnswerOverride?) {
        self.rules = rules
        self.answerOverride = answerOverride
        self.faults = Locked(faults)
        self.statistics = Locked(APNsSimulatorStatistics())
    }

    var currentFaults: APNsSimulatorFaults {
        get { faults.withLock { $0 } }
        set { faults.withLock { $0 = newValue } }
    }

    var currentStatistics: APNsSimulatorStatistics { statistics.withLock { $0 } }

    /// Starts counting afresh; the answers waiting now still count as waiting.
    func resetStatistics() {
        statistics.withLock { statistics in
            let waiting = statistics.answersWaiting
            statistics = APNsSimulatorStatistics()
            statistics.answersWaiting = waiting
        }
    }

    func handle(_ request: HTTP2ServerRequest, responder: HTTP2Responder) {
        let connection = responder.connection
        let faults = self.faults.withLock { $0 }
        let received = connection.requestsReceived
        statistics.withLock { $0.requestsReceived += 1 }

        if let every = faults.dropConnectionEveryStreams, received % every == 0 {
            statistics.withLock { $0.connectionsDropped += 1 }
            connection.drop()
            return
        }
        if let limit = faults.halfOpenAfterStreams, received > limit {
            connection.stopReadingAndWriting { [statistics] in statistics.withLock { $0.connectionsHalfOpened += 1 } }
            return
        }
        if let every = faults.goAwayEveryStreams, received % every == 0 {
            statistics.withLock { $0.goAwaysSent += 1 }
            connection.goAwayWhenDrained(lastStreamID: responder.streamID)
        }
        if faults.stallRate > 0, Double.random(in: 0..<1) < faults.stallRate {
            statistics.withLock { $0.streamsStalled += 1 }
            return
        }

        let simulated = APNsSimulatorRequest(method: request.method, path: request.path,
                                             headers: request.headers, body: request.body, bodyLength: request.bodyLength)
        var answer: APNsSimulatorAnswer
        if let overridden = answerOverride?(simulated) {
            answer = overridden
        } else {
            let state = self.state(of: connection)
            let limits = APNsSimulatorRules.TokenLimits(
                maximumAgeSeconds: faults.jwtMaximumAge?.wholeSeconds,
                updateMinimumIntervalSeconds: faults.tokenUpdateMinimumInterval?.wholeSeconds)
            answer = rules.answer(simulated, connection: &state.auth, tokenLimits: limits)
            if state.auth.hasAuthenticatedRequest { connection.raiseConcurrentStreamLimit() }
        }
        if answer.status == 200, !faults.failureRates.isEmpty,
           let failure = faults.injectedFailure(draw: Double.random(in: 0..<1)) {
            answer = APNsSimulatorAnswer(status: failure.status, headers: answer.headers,
                                         body: APNsSimulatorRules.errorBody(failure.reason), reason: failure.reason)
        }
        if answer.status == 200, let hostile = faults.hostileAnswer {
            switch hostile {
            case .pingFlood(let count): connection.sendPings(count)
            case .settingsFlood(let count): connection.sendSettings(count)
            default: break
            }
            answer = hostile.answer(replacing: answer.headers)
        }
        send(answer, responder: responder, after: faults.latency)
    }

    private func send(_ answer: APNsSimulatorAnswer, responder: HTTP2Responder, after latency: Duration) {
        guard latency > .zero else {
            statistics.withLock { $0.answersByStatus[answer.status, default: 0] += 1 }
            responder.respond(status: answer.status, headers: answer.headers, body: answer.body)
            return
        }
        statistics.withLock { $0.answersWaiting += 1 }
        responder.respond(after: latency, { [statistics] in
            statistics.withLock { statistics in
                statistics.answersWaiting -= 1
                statistics.answersByStatus[answer.status, default: 0] += 1
            }
            responder.respond(status: answer.status, headers: answer.headers, body: answer.body)
        }, ifStreamCloses: { [statistics] in
            statistics.withLock { statistics in
                statistics.answersWaiting -= 1
                statistics.answersWithdrawn += 1
            }
        })
    }

    /// The connection's state, created with its first request.
    private func state(of connection: HTTP2ServerConnection) -> ConnectionState {
        if let state = connection.handlerState as? ConnectionState { return state }
        let subject = connection.clientCertificateSubject.map { ClientCertificate.bundleID(fromSubject: $0) ?? "" }
        let state = ConnectionState(auth: APNsConnectionAuthState(clientCertificateSubject: subject))
        connection.handlerState = state
        return state
    }

    // MARK: - HTTP2ServerObserver

    func serverConnectionDidOpen(_ connection: HTTP2ServerConnection) {
        statistics.withLock { $0.connectionsAccepted += 1 }
    }

    func serverConnection(_ connection: HTTP2ServerConnection, didOpenStreamWithOpenCount openCount: Int) {
        statistics.withLock { $0.peakOpenStreams = max($0.peakOpenStreams, openCount) }
    }

    func serverConnectionDidReceivePing(_ connection: HTTP2ServerConnection) {
        statistics.withLock { $0.pingsAnswered += 1 }
    }

    func serverConnectionDidReceivePingAcknowledgement(_ connection: HTTP2ServerConnection) {
        statistics.withLock { $0.pingAcknowledgementsReceived += 1 }
    }

    func serverConnectionDidReceiveSettingsAcknowledgement(_ connection: HTTP2ServerConnection) {
        statistics.withLock { $0.settingsAcknowledgementsReceived += 1 }
    }

    func serverDidEvictIdleConnection() {
        statistics.withLock { $0.connectionsEvicted += 1 }
    }

    func serverDidRefuseConnection() {
        statistics.withLock { $0.connectionsRefused += 1 }
    }
}
