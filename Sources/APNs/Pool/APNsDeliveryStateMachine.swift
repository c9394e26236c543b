import HTTP2

/// The pool's bookkeeping of notifications, apart from sockets: one queue of notifications
/// waiting for a stream, the retries waiting for their time, attempts, expiry.
///
/// A value type driven by events and the time: `enqueue`, `nextToSend`, `streamFinished`,
/// `tick`. What it returns the owner (`APNsConnectionPool`) carries out on its loop; its
/// `nextDeadline` is when the pool's one timer must call `tick`.
struct APNsDeliveryStateMachine {
    /// The retry policy (contract §6).
    struct Configuration {
        /// Requests APNs may see per notification, the first included.
        var maxAttempts: Int
        /// Backoff of retried notifications (full jitter).
        var retryBackoff: APNsBackoff
        /// Backoff of the first re-sends of streams APNs did not process (REFUSED_STREAM,
        /// GOAWAY): short, but never zero-delay.
        var notProcessedBackoff = APNsBackoff(initial: .milliseconds(20), maximum: .seconds(1))
        /// Re-sends of one notification spaced by `notProcessedBackoff`. Later ones wait longer
        /// (`slowNotProcessedBackoff`); none counts as an attempt (contract §6), so a server
        /// refusing every stream makes its notifications wait, slowly re-sent, until it takes
        /// them or their `expiration` passes.
        var quickNotProcessedResends = 8

        /// The backoff after the quick re-sends: from where `notProcessedBackoff` ends, doubling
        /// up to `retryBackoff`'s maximum (never below the quick one's: a small `max_backoff`
        /// must not turn an endless series of refusals into a tight loop).
        var slowNotProcessedBackoff: APNsBackoff {
            let floor = Duration.nanoseconds(notProcessedBackoff.maximumNanoseconds)
            return APNsBackoff(initial: floor, maximum: .nanoseconds(max(retryBackoff.maximumNanoseconds,
                                                                            notProcessedBackoff.maximumNanoseconds)))
        }
        /// While notifications wait, how often their `expiration` is checked.
        var expirySweepNanoseconds: Int64 = 1_000_000_000
    }

    /// A notification in the pool's care.
    struct Entry {
        var pending: APNsPendingNotification
        /// Requests APNs may have seen.
        var attempts = 0
        /// Re-sends of streams APNs did not process.
        var notProcessedResends = 0
        /// The last answer, reported if retries run out. Boxed: only a retried notification has
        /// one, and the entry is moved several times on the way of every notification (into the
        /// queue, onto a stream, back out); inline, the answer made it 193 bytes instead of 136.
        var lastAnswer: APNsAnswer? {
            get { lastAnswerBox?.answer }
            set { lastAnswerBox = newValue.map(AnswerBox.init) }
        }
        private var lastAnswerBox: AnswerBox?

        private final class AnswerBox {
            let answer: APNsAnswer
            init(_ answer: APNsAnswer) { self.answer = answer }
        }

        init(_ pending: APNsPendingNotification) {
            self.pending = pending
        }

        /// Whether `expiration` (Unix seconds; 0 = deliver once, no storing) has passed at `unixSeconds`.
        func hasExpired(unixSeconds: Int64) -> Bool {
            guard let expiration = pending.notification.expiration, expiration > 0 else { return false }
            return expiration <= unixSeconds
        }

        /// The result reported when this notification ends without another request.
        var resultWithoutAnotherAttempt: APNsDeliveryResult {
            guard attempts > 0, let lastAnswer else { return APNsDeliveryResult(outcome: .expired, attempts: 0) }
            return Entry.result(of: lastAnswer, attempts: attempts)
        }

        static func result(of answer: consuming APNsAnswer, attempts: Int) -> APNsDeliveryResult {
            switch answer {
            case .response(let response): APNsDeliveryResult(outcome: .response(response), attempts: attempts)
            case .failure(let failure): APNsDeliveryResult(outcome: .failure(failure), attempts: attempts)
            }
        }
    }

    /// What becomes of a finished stream.
    enum Decision {
        /// Final: report `result`.
        case finish(APNsDeliveryResult)
        /// Sent again after its backoff, for `cause`.
        case retry(APNsRetryCause, dueAt: Int64)
    }

    let configuration: Configuration
    private let jitter: APNsJitterSource
    /// Waiting notifications from `queueHead` on; the slots before it were moved out (nil), so
    /// taking an entry moves it instead of copying it (a copy retains each of its strings and
    /// arrays, and the compaction then releases them).
    private var queue: [Entry?] = []
    private var queueHead = 0
    private var retries = APNsRetryHeap()
    private var nextSweepAt: Int64?

    init(configuration: Configuration, jitter: APNsJitterSource) {
        self.configuration = configuration
        self.jitter = jitter
    }

    /// Notifications waiting for a stream now.
    var queuedCount: Int { queue.count - queueHead }
    /// Entries the queue's storage holds, sent ones not yet compacted away included (for tests).
    var queueStorageCount: Int { queue.count }
    /// Notifications waiting for their retry time.
    var retryingCount: Int { retries.count }

    /// When `tick` next has something to do: the earliest due retry, or the next expiry check
    /// while notifications wait.
    var nextDeadline: Int64? {
        switch (retries.earliestDueAt, queuedCount > 0 ? nextSweepAt : nil) {
        case let (retry?, sweep?): min(retry, sweep)
        case let (retry?, nil): retry
        case let (nil, sweep?): sweep
        case (nil, nil): nil
        }
    }

    // MARK: - Events

    /// New notifications from `APNsClient.send`, moved into the queue in their order.
    mutating func enqueue(_ batch: consuming [APNsPendingNotification], now: Int64) {
        compact()
        // No exact `reserveCapacity`: it would reallocate and copy the whole queue (up to
        // `max_in_flight` entries) for every batch; appends grow it geometrically.
        // Popped from the end after a reverse, each notification moves out of the batch: a
        // `for … in` would copy it (retaining its strings and arrays), and dropping the batch
        // would release them again. Reversed through its buffer, whose swaps move elements (the
        // array's own `reverse()` swaps through copies, which retain).
        batch.withUnsafeMutableBufferPointer { $0.reverse() }
        while let pending = batch.popLast() {
            queue.append(Entry(pending))
        }
        scheduleSweepIfNeeded(now: now)
    }

    /// The next notification to put on a stream, or nil when none waits. Notifications whose
    /// `expiration` has passed are appended to `finished` on the way.
    mutating func nextToSend(now: APNsInstant, finished: inout [(Entry, APNsDeliveryResult)]) -> Entry? {
        while queueHead < queue.count {
            // invariant: slots from `queueHead` on hold entries (only `nextToSend` empties them, moving past).
            let entry = queue[queueHead].take()!
            queueHead += 1
            if entry.hasExpired(unixSeconds: now.unixSeconds) {
                finished.append((entry, entry.resultWithoutAnotherAttempt))
                continue
            }
            return entry
        }
        compact()
        return nil
    }

    /// Gives back a notification taken by `nextToSend` that could not be submitted after all;
    /// it goes first again.
    mutating func putBack(_ entry: Entry) {
        if queueHead > 0 {
            queueHead -= 1
            queue[queueHead] = entry
        } else {
            queue.insert(entry, at: 0)
        }
    }

    /// A stream ended with `answer`; `disposition` is `APNsAnswerDisposition.of(answer, …)`.
    /// A retry is kept here (a copy of `entry`) until its time; a final answer is returned to
    /// report. `entry` is updated in place (its attempts) and `answer` is consumed (its response
    /// moves into the result), so the common final answer copies nothing.
    mutating func streamFinished(_ entry: inout Entry, answer: consuming APNsAnswer, disposition: APNsAnswerDisposition,
                                 now: APNsInstant) -> Decision {
        guard case .retry(let cause) = disposition else {
            entry.attempts += 1
            return .finish(Entry.result(of: answer, attempts: entry.attempts))
        }
        var delay: Int64
        if cause.countsAsAttempt {
            entry.attempts += 1
            entry.lastAnswer = copy answer
            if entry.attempts >= configuration.maxAttempts {
                return .finish(Entry.result(of: answer, attempts: entry.attempts))
            }
            delay = configuration.retryBackoff.fullJitterNanoseconds(attempt: entry.attempts, jitter: jitter)
        } else {
            entry.notProcessedResends += 1
            if entry.lastAnswer == nil { entry.lastAnswer = answer }
            // Equal jitter: never a zero delay, so a refusing server cannot make the pool spin.
            let resends = entry.notProcessedResends
            let quick = configuration.quickNotProcessedResends
            delay = resends <= quick
                ? configuration.notProcessedBackoff.equalJitterNanoseconds(attempt: resends, jitter: jitter)
                : configuration.slowNotProcessedBackoff.equalJitterNanoseconds(attempt: resends - quick, jitter: jitter)
        }
        // Never past the notification's expiration. Compared in whole seconds (the same test as in
        // milliseconds, for times after 1970): any non-negative Int64 is a valid expiration, and
        // `expiration * 1000` would overflow; within this branch it cannot.
        if let expiration = entry.pending.notification.expiration, expiration > 0,
           (now.unixMilliseconds + delay / 1_000_000) / 1000 >= expiration {
            let leftNanoseconds = (expiration * 1000 - now.unixMilliseconds) * 1_000_000
            if cause.countsAsAttempt {
                // A counted retry whose draw fell past the expiration is drawn again (full jitter)
                // within the time left, when at least the first backoff is left; otherwise it stops.
                guard leftNanoseconds >= configuration.retryBackoff.initialNanoseconds else {
                    return .finish(entry.resultWithoutAnotherAttempt)
                }
                delay = min(Int64(Double(leftNanoseconds) * jitter.next()), leftNanoseconds - 1_000_000)
            } else {
                guard leftNanoseconds > 0 else { return .finish(entry.resultWithoutAnotherAttempt) }
                delay = Self.notProcessedDelay(leftNanoseconds: leftNanoseconds,
                                               floor: configuration.notProcessedBackoff.initialNanoseconds)
            }
        }
        let dueAt = now.nanoseconds + delay
        retries.insert(entry, dueAt: dueAt)
        return .retry(cause, dueAt: dueAt)
    }

    /// The wait of a stream APNs did not process whose backoff would end past the notification's
    /// expiration, `leftNanoseconds` away. With time enough left it is re-sent
    /// `expiryMarginNanoseconds` before the expiration: it still has a chance. Otherwise it waits
    /// until the expiration has passed, and `nextToSend` then reports it `expired` (contract §3:
    /// not sent because the expiration had passed, so never reported before that), the wait never
    /// shorter than `floor`, so that a clock read early cannot turn the refusals into a tight loop.
    static func notProcessedDelay(leftNanoseconds: Int64, floor: Int64) -> Int64 {
        let resendIn = leftNanoseconds - expiryMarginNanoseconds
        return resendIn >= floor ? resendIn : max(leftNanoseconds, floor)
    }

    /// How long before the expiration a last re-send is aimed: the wall clock is read coarsely
    /// (to the kernel's tick, up to 10 ms at 100 Hz) and lags, so aiming closer could send the
    /// request after the expiration.
    static let expiryMarginNanoseconds: Int64 = 15_000_000

    /// A stream ended with `answer` after the pool began to shut down, when nothing is sent
    /// again: an answer that would be retried ends as the shutdown ends every notification not yet
    /// answered (connection lost, "client is shutting down"), so its caller leaves it unanswered;
    /// one that is final, or whose attempts are used up, is reported as it would be otherwise.
    func streamFinishedAtShutdown(_ entry: inout Entry, answer: consuming APNsAnswer,
                                  disposition: APNsAnswerDisposition) -> APNsDeliveryResult {
        guard case .retry(let cause) = disposition else {
            entry.attempts += 1
            return Entry.result(of: answer, attempts: entry.attempts)
        }
        if cause.countsAsAttempt {
            entry.attempts += 1
            if entry.attempts >= configuration.maxAttempts {
                return Entry.result(of: answer, attempts: entry.attempts)
            }
        }
        return APNsDeliveryResult(outcome: .failure(.connectionLost(Self.shutdownReason)), attempts: entry.attempts)
    }

    /// The lost connection's reason of the notifications a shutdown ends unanswered.
    static let shutdownReason = "client is shutting down"

    /// Time passes: due retries join the queue; waiting notifications whose `expiration` passed
    /// are returned to report.
    mutating func tick(now: APNsInstant) -> [(Entry, APNsDeliveryResult)] {
        var finished: [(Entry, APNsDeliveryResult)] = []
        compact()
        while let entry = retries.popDue(now: now.nanoseconds) {
            queue.append(entry)
        }
        if let sweepAt = nextSweepAt, now.nanoseconds >= sweepAt {
            nextSweepAt = nil
            sweepExpired(now: now, into: &finished)
        }
        scheduleSweepIfNeeded(now: now.nanoseconds)
        return finished
    }

    /// Shutdown: every notification still here, queued or waiting for a retry.
    mutating func removeAll() -> [Entry] {
        var all = queue[queueHead...].compactMap { $0 }
        all.append(contentsOf: retries.removeAll())
        queue.removeAll()
        queueHead = 0
        nextSweepAt = nil
        return all
    }

    // MARK: - Internals

    private mutating func scheduleSweepIfNeeded(now: Int64) {
        if nextSweepAt == nil, queuedCount > 0 {
            nextSweepAt = now + configuration.expirySweepNanoseconds
        }
    }

    private mutating func sweepExpired(now: APNsInstant, into finished: inout [(Entry, APNsDeliveryResult)]) {
        let seconds = now.unixSeconds
        guard queue[queueHead...].contains(where: { $0?.hasExpired(unixSeconds: seconds) == true }) else { return }
        var kept: [Entry?] = []
        kept.reserveCapacity(queuedCount)
        for case let entry? in queue[queueHead...] {
            if entry.hasExpired(unixSeconds: seconds) {
                finished.append((entry, entry.resultWithoutAnotherAttempt))
            } else {
                kept.append(entry)
            }
        }
        queue = kept
        queueHead = 0
    }

    private mutating func compact() {
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: queue.count < 65_536)
            queueHead = 0
        } else if queueHead > 4096 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }
}

/// Retries waiting for their time: a binary min-heap by due time, then by insertion order.
struct APNsRetryHeap {
    private struct Item {
        var dueAt: Int64
        var sequence: UInt64
        var entry: APNsDeliveryStateMachine.Entry

        func isBefore(_ other: Item) -> Bool {
            dueAt != other.dueAt ? dueAt < other.dueAt : sequence < other.sequence
        }
    }

    private var items: [Item] = []
    private var nextSequence: UInt64 = 0

    var count: Int { items.count }
    var earliestDueAt: Int64? { items.first?.dueAt }

    mutating func insert(_ entry: APNsDeliveryStateMachine.Entry, dueAt: Int64) {
        items.append(Item(dueAt: dueAt, sequence: nextSequence, entry: entry))
        nextSequence &+= 1
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].isBefore(items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popDue(now: Int64) -> APNsDeliveryStateMachine.Entry? {
        guard let first = items.first, first.dueAt <= now else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                guard left < items.count else { break }
                var smallest = left
                if left + 1 < items.count && items[left + 1].isBefore(items[left]) { smallest = left + 1 }
                guard items[smallest].isBefore(items[parent]) else { break }
                items.swapAt(smallest, parent)
                parent = smallest
            }
        }
        return first.entry
    }

    mutating func removeAll() -> [APNsDeliveryStateMachine.Entry] {
        defer { items.removeAll() }
        return items.map(\.entry)
    }
}
