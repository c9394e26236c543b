import HTTP2
import Observability
import Synchronization

// The connection side of the pool: carrying out connection state machine actions and
// reacting to HTTP/2 connection events. Loop thread only.
extension APNsConnectionPool {
    /// Carries out a connection state machine's action.
    func perform(_ action: APNsConnectionStateMachine.Action, on member: Member) {
        loop.preconditionInEventLoop()
        switch action {
        case .none:
            break
        case .connect:
            let connection = HTTP2ClientConnection(
                host: configuration.host, port: configuration.port, tls: tls, loop: loop,
                delegate: member, streamTimeoutNanoseconds: configuration.requestTimeoutNanoseconds,
                maxResponseBodyBytes: APNsConnectionPool.maxResponseBodyBytes,
                expectedResponseHeaderNames: APNsResponse.headerNames
            )
            member.connection = connection
            member.authorization = nil
            connection.start()
        case .sendPing:
            if member.connection?.ping() != true {
                member.machine.pingAcknowledged(now: clock.now().nanoseconds)
            }
        case .close(let reason):
            if reason != .shutdown {
                logger.info("closing a connection", metadata: ["apns.pool": name, "apns.connection": "\(member.index)",
                                                               "reason": "\(reason)"])
            }
            // Its open streams finish `.connectionLost` (back to the queue), then `memberClosed`.
            if let connection = member.connection {
                connection.close()
            } else {
                _ = member.machine.closed(now: clock.now().nanoseconds, lostReason: "no connection")
            }
        }
    }

    /// Publishes the count of connections per state (on state changes only, never per stream),
    /// and whether the endpoint is unreachable: no connection ready, and one waiting to reconnect
    /// or connecting after failing twice in a row (a single lost connection that reconnects at
    /// once is not an outage, nor is a connection draining after a GOAWAY).
    func refreshStateCounts() {
        var counts: [APNsConnectionStateName: Int] = [:]
        var failing = false
        for member in members {
            let state = member.machine.stateName
            counts[state, default: 0] += 1
            if state == .backoff || state == .connecting,
               member.machine.consecutiveFailures >= Self.failuresMakingUnreachable {
                failing = true
            }
        }
        stateCounts.withLock { $0 = counts }
        unreachable.store(failing && (counts[.ready] ?? 0) == 0, ordering: .relaxed)
    }

    // MARK: - Connection events

    func memberBecameReady(_ member: Member, _ connection: HTTP2ClientConnection) {
        loop.preconditionInEventLoop()
        guard member.connection === connection else { return }
        member.machine.becameReady(now: clock.now().nanoseconds)
        logger.debug("connection ready", metadata: ["apns.pool": name, "apns.connection": "\(member.index)"])
        refreshStateCounts()
        pump()
        rearmTimer()
    }

    func settingsChanged(_ member: Member, _ connection: HTTP2ClientConnection, maxConcurrentStreams: Int) {
        loop.preconditionInEventLoop()
        guard member.connection === connection else { return }
        member.machine.peerStreamLimitChanged(maxConcurrentStreams, now: clock.now().nanoseconds)
        pump()
        rearmTimer()
    }

    func pingAcknowledged(_ member: Member, _ connection: HTTP2ClientConnection) {
        loop.preconditionInEventLoop()
        guard member.connection === connection else { return }
        let wasSuspect = member.machine.suspectSince != nil
        member.machine.pingAcknowledged(now: clock.now().nanoseconds)
        rearmTimer()
        if wasSuspect { schedulePump() }  // it takes streams again
    }

    func goAwayReceived(_ member: Member, _ connection: HTTP2ClientConnection) {
        loop.preconditionInEventLoop()
        guard member.connection === connection else { return }
        member.machine.goAwayReceived()
        closeIfIdleAndUnusable(member, connection)
        refreshStateCounts()
    }

    /// A draining connection with no streams left, or a ready one whose stream ids are used up,
    /// is closed (and replaced after its backoff). One already closed, reporting its streams
    /// as it goes (the network ended it while it drained), is not: its own reason follows
    /// (`memberClosed`), and a drain cut short is a lost connection, not a GOAWAY's end.
    private func closeIfIdleAndUnusable(_ member: Member, _ connection: HTTP2ClientConnection) {
        guard connection.activeStreams == 0, !connection.isClosed else { return }
        // A ready connection that takes no streams for another reason than its ids (nghttp2 ends
        // the session after a protocol error) closes by itself, with that reason.
        let canStart = !connection.isReady || !connection.streamIDsUsedUp
        perform(member.machine.noStreamsLeft(canStartStreams: canStart), on: member)
    }

    func streamFinished(_ member: Member, _ connection: HTTP2ClientConnection, tag: UInt64,
                        result: Result<HTTP2Response, HTTP2StreamFailure>) {
        loop.preconditionInEventLoop()
        guard var flight = inFlight.remove(tag: tag) else { return }
        let now = clock.now()
        let answer: APNsAnswer
        switch result {
        case .success(let http):
            let response = APNsResponse(http)
            answer = .response(response)
            observer?.apnsAnswered(status: response.status, reason: response.reason?.rawValue,
                                   durationNanoseconds: max(0, now.nanoseconds - flight.sentAt))
            if response.status == 403, response.reason == .invalidProviderToken,
               let tokenProvider, tokenProvider.shouldLogInvalidProviderToken() {
                logger.error("APNs rejects the provider token (InvalidProviderToken): check the key, key id and team id",
                             metadata: ["apns.pool": name, "apns.key_id": tokenProvider.keyID])
            }
        case .failure(let failure):
            answer = .failure(failure)
            if failure == .timeout {
                perform(member.machine.streamTimedOut(now: now.nanoseconds), on: member)
            }
        }
        var disposition = APNsAnswerDisposition.of(answer, afterGoAway: connection.receivedGoAway)
        if isShuttingDown {
            // Nothing is sent again: even a whole answer (one that came before the request's
            // body went out) that would be retried ends unanswered, as the rest do.
            let result = delivery.streamFinishedAtShutdown(&flight.entry, answer: consume answer, disposition: disposition)
            finish(flight.entry, result)
        } else {
            if case .retry(.expiredProviderToken) = disposition, let generation = flight.tokenGeneration,
               let tokenProvider, !tokenProvider.reportExpired(generation: generation) {
                // The token was signed on APNs' own demand minutes ago and is called expired again
                // (a clock off by an hour?): Apple allows no new one within 20 minutes, and
                // sending with the same one would only be refused again. Final, as if retries ran out.
                disposition = .final
                if tokenProvider.shouldLogExpiredTooSoon(generation: generation) {
                    logger.error("APNs calls a provider token signed minutes ago expired; check this host's clock",
                                 metadata: ["apns.pool": name, "apns.key_id": tokenProvider.keyID])
                }
            }
            switch delivery.streamFinished(&flight.entry, answer: consume answer, disposition: disposition, now: now) {
            case .finish(let final):
                finish(flight.entry, final)
            case .retry(let cause, _):
                observer?.apnsRetrying(cause)
            }
        }
        if member.connection === connection {
            closeIfIdleAndUnusable(member, connection)
        }
        schedulePump()
    }

    func memberClosed(_ member: Member, _ connection: HTTP2ClientConnection, reason: String) {
        loop.preconditionInEventLoop()
        guard member.connection === connection else { return }
        member.connection = nil
        let closeReason = member.machine.closed(now: clock.now().nanoseconds, lostReason: reason)
        refreshStateCounts()
        guard !isShuttingDown else { return }
        observer?.apnsConnectionClosed(closeReason)
        switch closeReason {
        case .goAway, .streamIDsExhausted:
            logger.debug("connection closed", metadata: ["apns.pool": name, "apns.connection": "\(member.index)",
                                                        "reason": "\(closeReason)"])
        default:
            logger.warning("connection closed", metadata: ["apns.pool": name, "apns.connection": "\(member.index)",
                                                          "reason": "\(closeReason)"])
        }
        pump()
        rearmTimer()
    }
}
