#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
import Observability
import Synchronization

/// One thread running an epoll loop: file descriptor events, timers and submitted tasks.
///
/// Thread ownership: the loop thread owns every registered file descriptor and its handler, the
/// timer heap and the shared read buffer. `execute`, `schedule`, `cancel`, `inEventLoop` and
/// `shutdown` are safe from any thread; the internal registration API (`register`,
/// `setInterest`, `unregister`, `scheduleFlush`) is loop-thread only.
///
/// One iteration: wait (timeout = earliest timer, or 0 when tasks are queued) → dispatch fd events
/// → run due timers → run queued tasks (FIFO) → run end-of-iteration flushes.
public final class EventLoop: @unchecked Sendable {
    /// The loop's name (also its thread's name).
    public let name: String

    private struct SharedState {
        var tasks: [@Sendable () -> Void] = []
        var stopping = false
        var joined = false
        var exited = false
    }

    private struct Registration {
        var generation: UInt32
        var handler: EventLoopIOHandler
        var interest: IOInterest
    }

    private let state = Locked(SharedState())
    private let threadID = Atomic<UInt>(0)
    private let epollFD: Int32
    private let wakeFD: Int32
    private var thread = pthread_t()
    private static let wakeToken: UInt64 = .max
    private static let maxEvents: Int32 = 256
    private let logger = Logger(label: "http2.eventloop")

    // Loop-thread state.
    private var registrations: [Int32: Registration] = [:]
    private var nextGeneration: UInt32 = 1
    private var timers = TimerHeap()
    private var spareTasks: [@Sendable () -> Void] = []
    /// `epoll_pwait2` is used (false when the loop was made without it, or after it failed for
    /// any reason but EINTR: ENOSYS before Linux 5.11, EPERM under a seccomp profile without it).
    private var hasPreciseWait: Bool
    private var flushQueue: [EventLoopFlushable] = []
    private var spareFlushQueue: [EventLoopFlushable] = []
    private let events: UnsafeMutablePointer<epoll_event>

    /// A 64 KiB buffer that loop-thread code may use for reads (one reader at a time).
    let readBuffer: UnsafeMutableRawBufferPointer

    /// Creates the epoll instance and the eventfd, and starts the loop's thread.
    ///
    /// Also sets `SIGPIPE` to ignored for the process: writes to a closed socket must fail with
    /// `EPIPE` instead of killing the process.
    /// - Throws: ``HTTP2Error`` when a system resource cannot be created.
    public convenience init(name: String) throws {
        try self.init(name: name, preciseTimeouts: true)
    }

    /// - Parameters:
    ///   - preciseTimeouts: false waits with `epoll_wait` and millisecond timeouts from the start
    ///     (tests of that path).
    ///   - stackBytes: the loop thread's stack size; nil: the system's default (tests of paths
    ///     that must not nest calls per request).
    init(name: String, preciseTimeouts: Bool, stackBytes: Int? = nil) throws {
        self.name = name
        hasPreciseWait = preciseTimeouts
        signal(SIGPIPE, SIG_IGN)
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw HTTP2Error.system("epoll_create1") }
        let wakeFD = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard wakeFD >= 0 else {
            let error = HTTP2Error.system("eventfd")
            close(epollFD)
            throw error
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.wakeToken
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event) == 0 else {
            let error = HTTP2Error.system("epoll_ctl")
            close(epollFD)
            close(wakeFD)
            throw error
        }
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        self.events = .allocate(capacity: Int(Self.maxEvents))
        self.readBuffer = .allocate(byteCount: 65_536, alignment: 16)
        do {
            thread = try ThreadStarter.start(name: name, detached: false, stackBytes: stackBytes) { [self] in run() }
        } catch {
            close(epollFD)
            close(wakeFD)
            throw error
        }
    }

    deinit {
        close(epollFD)
        close(wakeFD)
        events.deallocate()
        readBuffer.deallocate()
    }

    /// Whether the caller runs on this loop's thread.
    public var inEventLoop: Bool {
        threadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Stops the process when called off the loop thread: the first line of every loop-only
    /// method, so a thread-confinement mistake fails loudly instead of racing silently.
    @inline(__always)
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "called off the event loop thread of \(name)", file: file, line: line)
    }

    /// Runs `task` on the loop thread, after the tasks submitted before it (FIFO). Any thread.
    ///
    /// The loop is woken only when the queue goes from empty to non-empty. Tasks submitted after
    /// the loop stopped are dropped.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        let wake = state.withLock { state -> Bool in
            guard !state.exited else { return false }
            state.tasks.append(task)
            return state.tasks.count == 1
        }
        if wake && !inEventLoop { wakeUp() }
    }

    /// Runs `task` on the loop thread after at least `afterNanoseconds`. Any thread.
    @discardableResult
    public func schedule(afterNanoseconds: UInt64, _ task: @escaping @Sendable () -> Void) -> EventLoopTimer {
        let timer = EventLoopTimer()
        let deadline = monotonicNanoseconds() &+ afterNanoseconds
        if inEventLoop {
            timers.insert(deadline: deadline, timer: timer, task: task)
        } else {
            execute { [self] in timers.insert(deadline: deadline, timer: timer, task: task) }
        }
        return timer
    }

    /// Cancels a timer so its task never runs (if it has not run yet). Any thread.
    public func cancel(_ timer: EventLoopTimer) {
        guard !timer.cancelled.exchange(true, ordering: .relaxed),
              !timer.finished.load(ordering: .relaxed) else { return }
        if inEventLoop {
            timers.noteCancelled()
        } else {
            execute { [self] in timers.noteCancelled() }
        }
    }

    /// Stops the loop after its current iteration and joins its thread. Idempotent.
    ///
    /// Tasks already queued run before the thread exits; pending timers are dropped. Called on
    /// the loop thread itself, it stops the loop without joining (the thread is detached).
    public func shutdown() {
        let alreadyJoined = state.withLock { state -> Bool in
            let joined = state.joined
            state.stopping = true
            state.joined = true
            return joined
        }
        guard !alreadyJoined else { return }
        if inEventLoop {
            pthread_detach(thread)
        } else {
            wakeUp()
            pthread_join(thread, nil)
        }
    }

    private func wakeUp() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: - Loop

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        while true {
            let (timeout, stopping) = nextTimeout()
            if stopping { break }
            let count = wait(timeoutNanoseconds: timeout)
            if count < 0 && errno != EINTR {
                logger.error("epoll_wait failed", metadata: ["loop": name, "errno": "\(errno)"])
            }
            if count > 0 { dispatch(count: Int(count)) }
            runDueTimers()
            runTasks()
            runFlushes()
        }
        runTasks()
        runFlushes()
        stopRegisteredHandlers()
        timers.removeAll()
        let dropped = state.withLock { state -> [@Sendable () -> Void] in
            state.exited = true
            defer { state.tasks = [] }
            return state.tasks
        }
        _ = dropped  // released here, outside the lock (a task's captures may run deinit code)
    }

    /// Tells every handler still registered that the loop stopped (connections close their
    /// sockets) and releases them, so no handler and loop keep each other alive.
    private func stopRegisteredHandlers() {
        let handlers = registrations.values.map(\.handler)
        for handler in handlers { handler.eventLoopDidStop() }
        registrations.removeAll()
        flushQueue.removeAll()
    }

    /// The wait's timeout in nanoseconds: 0 when tasks are queued, else until the earliest timer
    /// (-1: no timer, wait for an event).
    private func nextTimeout() -> (Int64, Bool) {
        let (hasTasks, stopping) = state.withLock { (!$0.tasks.isEmpty, $0.stopping) }
        if stopping { return (0, true) }
        if hasTasks || !flushQueue.isEmpty { return (0, false) }
        guard let deadline = timers.earliestDeadline else { return (-1, false) }
        let now = monotonicNanoseconds()
        if deadline <= now { return (0, false) }
        return (Int64(min(deadline - now, UInt64(Int64.max))), false)
    }

    /// Waits for events up to `timeoutNanoseconds` (-1: without limit). `epoll_pwait2` takes the
    /// timeout to the nanosecond, so a timer fires when it is due, not at the next millisecond
    /// (a 50-ms answer delay or a PING deadline would otherwise run up to 1 ms late). If it fails
    /// for any reason but EINTR (ENOSYS before Linux 5.11, EPERM where a container's seccomp
    /// profile lacks it), the loop uses `epoll_wait` from then on, the timeout rounded up to
    /// milliseconds.
    private func wait(timeoutNanoseconds: Int64) -> Int32 {
        if hasPreciseWait {
            let count = apns_epoll_wait_nanoseconds(epollFD, events, Self.maxEvents, timeoutNanoseconds)
            guard count < 0, errno != EINTR else { return count }
            hasPreciseWait = false
            logger.debug("epoll_pwait2 refused; waiting with millisecond timeouts", metadata: ["loop": name, "errno": "\(errno)"])
        }
        let milliseconds = timeoutNanoseconds < 0
            ? -1 : timeoutNanoseconds / 1_000_000 + (timeoutNanoseconds % 1_000_000 == 0 ? 0 : 1)
        return epoll_wait(epollFD, events, Self.maxEvents, Int32(min(milliseconds, Int64(Int32.max))))
    }

    private func dispatch(count: Int) {
        for index in 0..<count {
            let event = events[index]
            let token = event.data.u64
            if token == Self.wakeToken {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
                continue
            }
            let fd = Int32(truncatingIfNeeded: token & 0xffff_ffff)
            let generation = UInt32(truncatingIfNeeded: token >> 32)
            let flags = event.events
            let errorFlags = EPOLLERR.rawValue | EPOLLHUP.rawValue
            if flags & (EPOLLIN.rawValue | errorFlags | EPOLLRDHUP.rawValue) != 0,
               let registration = registrations[fd], registration.generation == generation {
                registration.handler.eventLoopReadable()
            }
            if flags & (EPOLLOUT.rawValue | errorFlags) != 0,
               let registration = registrations[fd], registration.generation == generation {
                registration.handler.eventLoopWritable()
            }
        }
    }

    private func runDueTimers() {
        guard timers.count > 0 else { return }
        let now = monotonicNanoseconds()
        while let entry = timers.popDue(now: now) {
            entry.timer.finished.store(true, ordering: .relaxed)
            if !entry.timer.cancelled.load(ordering: .relaxed) { entry.task() }
        }
    }

    private func runTasks() {
        state.withLock { swap(&$0.tasks, &spareTasks) }
        guard !spareTasks.isEmpty else { return }
        for task in spareTasks { task() }
        spareTasks.removeAll(keepingCapacity: true)
    }

    private func runFlushes() {
        while !flushQueue.isEmpty {
            swap(&flushQueue, &spareFlushQueue)
            for handler in spareFlushQueue { handler.flushAtEndOfIteration() }
            spareFlushQueue.removeAll(keepingCapacity: true)
        }
    }
}

/// Which readiness events a registered file descriptor is interested in.
package struct IOInterest: OptionSet, Sendable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }
    package static let readable = IOInterest(rawValue: 1)
    package static let writable = IOInterest(rawValue: 2)

    var epollEvents: UInt32 {
        var events: UInt32 = 0
        if contains(.readable) { events |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if contains(.writable) { events |= EPOLLOUT.rawValue }
        return events
    }
}

/// An object that reacts to readiness of one file descriptor. Called on the loop thread only.
///
/// Errors and hang-ups are reported as both readable and writable; the handler finds out what
/// happened from the next read or write.
package protocol EventLoopIOHandler: AnyObject {
    /// The descriptor is readable (or failed / hung up).
    func eventLoopReadable()
    /// The descriptor is writable (or failed / hung up).
    func eventLoopWritable()
    /// The loop stopped with the descriptor still registered: release what it holds (close the
    /// socket). Called once on the loop thread, after which the loop drops the handler.
    func eventLoopDidStop()
}

extension EventLoopIOHandler {
    /// Default: nothing to release.
    package func eventLoopDidStop() {}
}

/// An object that wants to run once at the end of the current loop iteration (output coalescing).
package protocol EventLoopFlushable: AnyObject {
    /// Runs on the loop thread after the iteration's events, timers and tasks.
    func flushAtEndOfIteration()
}

extension EventLoop {
    /// Starts watching `fd` for `interest`, calling `handler` on readiness. Loop thread only.
    ///
    /// The loop keeps `handler` alive until `unregister`. A stale event for a closed and reused
    /// descriptor number is ignored thanks to a generation number in the epoll token.
    /// - Throws: ``HTTP2Error`` if `epoll_ctl` fails.
    package func register(fd: Int32, interest: IOInterest, handler: EventLoopIOHandler) throws {
        preconditionInEventLoop()
        let generation = nextGeneration
        nextGeneration = nextGeneration == UInt32.max - 1 ? 1 : nextGeneration + 1
        var event = epoll_event()
        event.events = interest.epollEvents
        event.data.u64 = UInt64(generation) << 32 | UInt64(UInt32(bitPattern: fd))
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else { throw HTTP2Error.system("epoll_ctl(ADD)") }
        registrations[fd] = Registration(generation: generation, handler: handler, interest: interest)
    }

    /// Changes the events watched for a registered descriptor (no system call if unchanged).
    func setInterest(fd: Int32, _ interest: IOInterest) {
        preconditionInEventLoop()
        guard let registration = registrations[fd], registration.interest != interest else { return }
        var event = epoll_event()
        event.events = interest.epollEvents
        event.data.u64 = UInt64(registration.generation) << 32 | UInt64(UInt32(bitPattern: fd))
        if epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event) == 0 {
            registrations[fd]?.interest = interest
        } else {
            logger.error("epoll_ctl(MOD) failed", metadata: ["loop": name, "errno": "\(errno)"])
        }
    }

    /// After `accept` on the listening socket `fd` failed for lack of descriptors or memory (the
    /// connection stays queued, and the level-triggered socket stays readable), stops watching it
    /// for `nanoseconds`, then watches it again if it is still the same registration. The server
    /// then retries ten times a second instead of on every wait of its loop. Loop thread only.
    package func pauseAccepting(fd: Int32, nanoseconds: UInt64 = 100_000_000) {
        guard let registration = registrations[fd], registration.interest.contains(.readable) else { return }
        let generation = registration.generation
        setInterest(fd: fd, [])
        _ = schedule(afterNanoseconds: nanoseconds) { [self] in
            // Not closed meanwhile, and not a reused descriptor number.
            guard registrations[fd]?.generation == generation else { return }
            setInterest(fd: fd, .readable)
        }
    }

    /// Whether `accept` failed with `error` for lack of descriptors or memory: the connection
    /// waits in the backlog, to be taken once some are free.
    package static func isResourceExhaustion(_ error: Int32) -> Bool {
        error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM
    }

    /// Stops watching `fd` and releases its handler. Call before closing the descriptor.
    package func unregister(fd: Int32) {
        preconditionInEventLoop()
        guard registrations.removeValue(forKey: fd) != nil else { return }
        var event = epoll_event()
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event)
    }

    /// Asks the loop to call `handler.flushAtEndOfIteration()` once this iteration's work is done.
    ///
    /// The caller avoids duplicates (it keeps its own "flush scheduled" flag). Loop thread only.
    package func scheduleFlush(_ handler: EventLoopFlushable) {
        preconditionInEventLoop()
        flushQueue.append(handler)
    }
}
