import Testing
@testable import APNs

@Suite struct APNsConnectionStateMachineTests {
    private func machine(jitter: APNsJitterSource = seededJitter(1),
                         zeroStreamLimitTimeout: Int64 = 10 * second) -> APNsConnectionStateMachine {
        APNsConnectionStateMachine(
            configuration: .init(pingIntervalNanoseconds: 60 * second, pingTimeoutNanoseconds: 10 * second,
                                 reconnect: APNsBackoff(initial: .milliseconds(100), maximum: .seconds(30)),
                                 zeroStreamLimitTimeoutNanoseconds: zeroStreamLimitTimeout),
            jitter: jitter)
    }

    @Test func reconnectBackoffGrowsToTheCapWithJitterAndNeverSpins() throws {
        var connection = machine()
        var now: Int64 = 0
        #expect(connection.start(now: now) == .connect)
        var delays: [Int64] = []
        // Ten hours of a server that refuses every connection, in simulated time.
        while now < 10 * 3600 * second {
            _ = connection.closed(now: now, lostReason: "connection refused")
            #expect(connection.stateName == .backoff)
            let until = try #require(connection.nextDeadline)
            #expect(connection.tick(now: until - 1) == .none)
            delays.append(until - now)
            now = until
            #expect(connection.tick(now: now) == .connect)
            #expect(connection.stateName == .connecting)
        }
        #expect(delays[0] >= 50 * millisecond && delays[0] <= 100 * millisecond)
        for (index, delay) in delays.enumerated() {
            let ceiling = min(100 * millisecond << min(index, 20), 30 * second)
            #expect(delay >= ceiling / 2 && delay <= ceiling, "delay \(index)")
        }
        #expect(delays.suffix(100).allSatisfy { $0 >= 15 * second })
        // About one attempt per 22.5 s on average once capped: no tight loop.
        #expect(delays.count < 10 * 3600 / 15)
    }

    /// A server that allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0) and answers PINGs
    /// would hold the pool's notifications forever on a connection that counts as ready: after
    /// the timeout it is replaced, as a failure, unless the server raises its limit in time.
    @Test func aConnectionAllowedNoStreamsForTheWholeTimeoutIsReplaced() {
        var connection = machine(jitter: fixedJitter(0), zeroStreamLimitTimeout: 5 * second)
        _ = connection.start(now: 0)
        connection.peerStreamLimitChanged(0, now: 1 * second)   // its first SETTINGS
        connection.becameReady(now: 1 * second)
        #expect(connection.nextDeadline == 6 * second)
        #expect(connection.tick(now: 6 * second - 1) == .none)
        connection.pingAcknowledged(now: 3 * second)            // alive, but still no streams
        #expect(connection.tick(now: 6 * second) == .close(.noStreamsAllowed))
        #expect(connection.closed(now: 6 * second, lostReason: "") == .noStreamsAllowed)
        #expect(connection.consecutiveFailures == 1)
        #expect(connection.stateName == .backoff)

        // A limit raised before the timeout keeps the connection; lowered to 0 again, the
        // timeout starts over.
        _ = connection.tick(now: connection.nextDeadline!)
        connection.peerStreamLimitChanged(0, now: 10 * second)
        connection.becameReady(now: 10 * second)
        connection.peerStreamLimitChanged(100, now: 14 * second)
        #expect(connection.nextDeadline == 10 * second + 60 * second, "only the PING interval is left")
        #expect(connection.tick(now: 16 * second) == .none)
        connection.peerStreamLimitChanged(0, now: 20 * second)
        #expect(connection.nextDeadline == 25 * second)
        #expect(connection.tick(now: 25 * second) == .close(.noStreamsAllowed))
    }

    /// With the default request timeout the connection was up longer than the 10 s that make a
    /// connection stable: it still never served, so failures add up (and the endpoint counts as
    /// unreachable) instead of starting over at every close.
    @Test func connectionsAllowedNoStreamsAddUpAsFailuresWhateverTheyLasted() {
        var connection = machine(jitter: fixedJitter(0), zeroStreamLimitTimeout: 15 * second)
        var now: Int64 = 0
        _ = connection.start(now: now)
        for failures in 1...3 {
            connection.peerStreamLimitChanged(0, now: now)
            connection.becameReady(now: now)
            now += 15 * second
            #expect(connection.tick(now: now) == .close(.noStreamsAllowed))
            _ = connection.closed(now: now, lostReason: "")
            #expect(connection.consecutiveFailures == failures)
            now = connection.nextDeadline!
            #expect(connection.tick(now: now) == .connect)
        }
    }

    @Test func aStableConnectionResetsTheBackoffAGracefulCloseIsNoFailure() {
        var connection = machine(jitter: fixedJitter(0))
        _ = connection.start(now: 0)
        for _ in 0..<6 {   // six failures: ceiling 3.2 s
            _ = connection.closed(now: 0, lostReason: "refused")
            _ = connection.tick(now: connection.nextDeadline!)
        }
        #expect(connection.consecutiveFailures == 6)
        connection.becameReady(now: 100 * second)
        // Lost after 30 s of service: the next delay starts again from the initial backoff.
        #expect(connection.closed(now: 130 * second, lostReason: "reset by peer") == .lost("reset by peer"))
        #expect(connection.consecutiveFailures == 1)
        #expect(connection.nextDeadline == 130 * second + 50 * millisecond)
        _ = connection.tick(now: connection.nextDeadline!)
        connection.becameReady(now: 131 * second)
        // A GOAWAY after a connection served for a while is graceful: no failure.
        connection.goAwayReceived()
        #expect(!connection.acceptsStreams && connection.stateName == .draining)
        #expect(connection.noStreamsLeft(canStartStreams: false) == .close(.goAway))
        #expect(connection.closed(now: 151 * second, lostReason: "") == .goAway)
        #expect(connection.consecutiveFailures == 0)
        #expect(connection.nextDeadline == 151 * second + 50 * millisecond)
    }

    /// A server that sends GOAWAY on every new connection (maintenance, a draining load
    /// balancer) gets reconnects with a growing backoff, not 10–20 handshakes a second.
    @Test func aGoAwaySoonAfterConnectingBacksOffLikeAFailure() throws {
        var connection = machine(jitter: fixedJitter(0))
        var now: Int64 = 0
        _ = connection.start(now: now)
        var delays: [Int64] = []
        for _ in 0..<12 {
            connection.becameReady(now: now + 5 * millisecond)
            connection.goAwayReceived()
            #expect(connection.noStreamsLeft(canStartStreams: false) == .close(.goAway))
            now += 7 * millisecond
            #expect(connection.closed(now: now, lostReason: "") == .goAway)
            let until = try #require(connection.nextDeadline)
            delays.append(until - now)
            now = until
            #expect(connection.tick(now: now) == .connect)
        }
        #expect(connection.consecutiveFailures == 12)
        for (index, delay) in delays.enumerated() {
            #expect(delay == min(100 * millisecond << index, 30 * second) / 2, "delay \(index)")
        }
    }

    @Test func pingAfterIdleIntervalAndReplacementWhenNotAcknowledged() {
        var connection = machine()
        _ = connection.start(now: 0)
        connection.becameReady(now: 0)
        #expect(connection.acceptsStreams)
        #expect(connection.nextDeadline == 60 * second)
        // Traffic postpones the PING.
        connection.receivedTraffic(at: 30 * second)
        #expect(connection.tick(now: 60 * second) == .none)
        #expect(connection.tick(now: 90 * second) == .sendPing)
        #expect(connection.nextDeadline == 100 * second)
        #expect(connection.tick(now: 95 * second) == .none)   // one PING at a time
        connection.pingAcknowledged(now: 96 * second)
        #expect(connection.nextDeadline == 156 * second)
        // Hours of idle, acknowledged PINGs: one PING per interval, never a close.
        var now = 96 * second
        var pings = 0
        while now < 5 * 3600 * second {
            now = connection.nextDeadline!
            switch connection.tick(now: now) {
            case .sendPing:
                pings += 1
                connection.pingAcknowledged(now: now + 20 * millisecond)
            case let other:
                Issue.record("unexpected \(other)")
            }
        }
        #expect(pings >= 295 && pings <= 300)
        // Then the peer goes silent: found one ping interval plus one ping timeout later.
        let silentFrom = now
        #expect(connection.tick(now: connection.nextDeadline!) == .sendPing)
        let deadline = connection.nextDeadline!
        #expect(connection.tick(now: deadline - 1) == .none)
        #expect(connection.tick(now: deadline) == .close(.pingTimeout))
        #expect(deadline - silentFrom <= 60 * second + 10 * second + 20 * millisecond)
        #expect(connection.stateName == .draining)
        #expect(connection.closed(now: deadline + 1, lostReason: "closed by client") == .pingTimeout)
        #expect(connection.stateName == .backoff)
    }

    @Test func aTimedOutStreamChecksThePeerAtOnce() {
        var connection = machine()
        _ = connection.start(now: 0)
        connection.becameReady(now: 0)
        #expect(connection.streamTimedOut(now: 5 * second) == .sendPing)
        // Suspected of being half-open: no new streams until the peer shows it is alive.
        #expect(!connection.acceptsStreams)
        #expect(connection.streamTimedOut(now: 6 * second) == .none)
        connection.receivedTraffic(at: 4 * second)  // a frame from before the suspicion proves nothing
        #expect(!connection.acceptsStreams)
        #expect(connection.tick(now: 15 * second) == .close(.pingTimeout))
    }

    @Test func aSuspectedConnectionTakesStreamsAgainOnceThePeerAnswers() {
        var connection = machine()
        _ = connection.start(now: 0)
        connection.becameReady(now: 0)
        #expect(connection.streamTimedOut(now: 5 * second) == .sendPing)
        #expect(!connection.acceptsStreams)
        connection.pingAcknowledged(now: 5 * second + 3 * millisecond)
        #expect(connection.acceptsStreams)
        // Any frame after the suspicion clears it too (a ping from the idle timer already out).
        #expect(connection.tick(now: 65 * second + 3 * millisecond) == .sendPing)
        #expect(connection.streamTimedOut(now: 66 * second) == .none)
        #expect(!connection.acceptsStreams)
        connection.receivedTraffic(at: 66 * second + 1)
        #expect(connection.acceptsStreams)
    }

    @Test func shutdownClosesAndNeverReconnects() {
        var connection = machine()
        _ = connection.start(now: 0)
        connection.becameReady(now: 0)
        #expect(connection.shutdown() == .close(.shutdown))
        #expect(connection.closed(now: second, lostReason: "") == .shutdown)
        #expect(connection.stateName == .closed)
        #expect(connection.nextDeadline == nil)
        #expect(connection.tick(now: 3600 * second) == .none)
        #expect(connection.start(now: 3600 * second) == .none)
        // Shut down while backing off: stays closed.
        var other = machine()
        _ = other.start(now: 0)
        _ = other.closed(now: 0, lostReason: "refused")
        #expect(other.shutdown() == .none)
        #expect(other.tick(now: 3600 * second) == .none && other.stateName == .closed)
    }
}
