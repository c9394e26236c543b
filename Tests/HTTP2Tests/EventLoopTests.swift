@testable import HTTP2
import APNsSimulator
import Synchronization
import Testing
import Observability

@Suite struct EventLoopTests {
    @Test(.timeLimit(.minutes(1)))
    func tasksRunInOrderOnTheLoopThread() async throws {
        let loop = try EventLoop(name: "test-loop")
        defer { loop.shutdown() }
        let seen = Locked<[Int]>([])
        let onLoop = Locked(true)
        #expect(loop.inEventLoop == false)
        for index in 0..<1000 {
            loop.execute {
                if !loop.inEventLoop { onLoop.withLock { $0 = false } }
                seen.withLock { $0.append(index) }
            }
        }
        #expect(await eventually { seen.withLock { $0.count } == 1000 })
        #expect(seen.withLock { $0 } == Array(0..<1000))
        #expect(onLoop.withLock { $0 })
    }

    @Test(.timeLimit(.minutes(1)))
    func timersFireInDeadlineOrderAndCancelledOnesNever() async throws {
        let loop = try EventLoop(name: "test-timers")
        defer { loop.shutdown() }
        let fired = Locked<[String]>([])
        // A tenth of a second apart: the loop's thread, just started and perhaps slowed by a
        // sanitizer, schedules "0ms" well before the others are due.
        loop.schedule(afterNanoseconds: 300_000_000) { fired.withLock { $0.append("300ms") } }
        loop.schedule(afterNanoseconds: 100_000_000) { fired.withLock { $0.append("100ms") } }
        let cancelled = loop.schedule(afterNanoseconds: 200_000_000) { fired.withLock { $0.append("cancelled") } }
        loop.cancel(cancelled)
        loop.execute {
            loop.schedule(afterNanoseconds: 0) { fired.withLock { $0.append("0ms") } }
        }
        // The cancelled timer was due before the 300 ms one: had it fired, it would be among the three.
        #expect(await eventually { fired.withLock { $0.count } == 3 })
        #expect(fired.withLock { $0 } == ["0ms", "100ms", "300ms"])
    }

    /// The loop waits with a nanosecond timeout (`epoll_pwait2`, Linux 5.11 and later): a timer
    /// due in 200 µs fires then, not at the next whole millisecond. The smallest delay of twenty
    /// such timers in a row is below a millisecond even on a busy machine; with a millisecond
    /// timeout every one of them waits at least 1 ms.
    @Test(.timeLimit(.minutes(1)))
    func aTimerDueWithinAMillisecondFiresBeforeIt() async throws {
        let loop = try EventLoop(name: "test-precise")
        defer { loop.shutdown() }
        let delays = Locked<[UInt64]>([])
        @Sendable func scheduleNext() {
            let scheduledAt = Timestamp.monotonicNanoseconds()
            loop.schedule(afterNanoseconds: 200_000) {
                let count = delays.withLock { delays in
                    delays.append(Timestamp.monotonicNanoseconds() - scheduledAt)
                    return delays.count
                }
                if count < 20 { scheduleNext() }
            }
        }
        loop.execute { scheduleNext() }
        #expect(await eventually { delays.withLock { $0.count } == 20 })
        let delaysNow = delays.withLock { $0 }
        #expect(delaysNow.allSatisfy { $0 >= 200_000 }, "a timer fired early: \(delaysNow)")
        #expect(delaysNow.min()! < 900_000, "every timer waited for the next millisecond: \(delaysNow)")
    }

    /// Where `epoll_pwait2` is refused, the loop waits with `epoll_wait`: timers still fire in
    /// order, and a deadline near the end of time (a timer meant as "never") neither traps the
    /// rounding up to milliseconds nor stops the loop serving tasks.
    @Test(.timeLimit(.minutes(1)))
    func withMillisecondTimeoutsTimersFireAndAFarDeadlineDoesNotTrap() async throws {
        let loop = try EventLoop(name: "test-ms-wait", preciseTimeouts: false)
        defer { loop.shutdown() }
        let far = loop.schedule(afterNanoseconds: UInt64(Int64.max)) {}
        let ran = Locked(false)
        loop.execute { ran.withLock { $0 = true } }  // the next wait's timeout is the far deadline
        #expect(await eventually { ran.withLock { $0 } })
        // Both scheduled in one task on the loop: their deadlines are taken together, whatever
        // keeps the test's thread from running.
        let fired = Locked<[String]>([])
        loop.execute {
            loop.schedule(afterNanoseconds: 2_000_000) { fired.withLock { $0.append("2ms") } }
            loop.schedule(afterNanoseconds: 300_000) { fired.withLock { $0.append("0.3ms") } }
        }
        #expect(await eventually { fired.withLock { $0.count } == 2 })
        #expect(fired.withLock { $0 } == ["0.3ms", "2ms"])
        loop.cancel(far)
    }

    @Test func shutdownIsIdempotentAndGroupsHandOutLoopsRoundRobin() throws {
        let group = try EventLoopGroup(threads: 2, name: "test-group")
        let first = group.next(), second = group.next(), third = group.next()
        #expect(first !== second)
        #expect(first === third)
        group.shutdown()
        group.shutdown()
    }

    @Test func certificateAuthorityWritesPEMFiles() throws {
        let credentials = try TestCredentials()
        defer { credentials.remove() }
        #expect(credentials.authority.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        let client = try credentials.authority.issueClientCertificate(commonName: "c")
        #expect(client.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(try client.encryptedPrivateKeyPEM(passphrase: "p").hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        #expect(try !client.pkcs12(passphrase: "p").isEmpty)
        // The written server files load into a server context (key matches certificate).
        _ = try credentials.serverContext(requireClientCertificates: true)
    }
}
