/// Decides which repeated log events are written: a state machine fed with events and times.
///
/// The first event of a kind (same level, component and message) is written. Identical ones
/// within `interval` after it are only counted. Once the interval has passed, the count comes
/// out as a ``Summary`` (`"<message> (repeated N times)"`) and the next identical event is
/// written again. At most `capacity` kinds are tracked; beyond that, new kinds are written
/// unfiltered rather than held in memory without bound.
public struct LogRepetitionFilter: Sendable {
    /// What makes two events identical.
    public struct Key: Hashable, Sendable {
        public var level: Logger.Level
        public var label: String
        public var message: String

        /// Creates a key.
        public init(level: Logger.Level, label: String, message: String) {
            self.level = level
            self.label = label
            self.message = message
        }
    }

    /// Events that were counted instead of written.
    public struct Summary: Equatable, Sendable {
        /// The kind of event.
        public var key: Key
        /// How many identical events were not written.
        public var count: Int

        /// Creates a summary.
        public init(key: Key, count: Int) {
            self.key = key
            self.count = count
        }
    }

    private struct Window {
        var start: ContinuousClock.Instant
        var suppressed: Int
    }

    /// The default interval: 10 seconds.
    public static let defaultInterval: Duration = .seconds(10)

    /// How long identical events are counted after one was written.
    public let interval: Duration
    /// The most kinds of events tracked at once.
    public let capacity: Int
    private var windows: [Key: Window] = [:]
    private var nextDue: ContinuousClock.Instant?

    /// Creates a filter.
    public init(interval: Duration = defaultInterval, capacity: Int = 1024) {
        self.interval = interval
        self.capacity = capacity
    }

    /// Whether an event of kind `key` at `now` is written (true) or only counted (false).
    public mutating func admit(_ key: Key, at now: ContinuousClock.Instant) -> Bool {
        if var window = windows[key], now - window.start < interval {
            window.suppressed += 1
            windows[key] = window
            return false
        }
        // A new window. (A window that ended with a count was reported by dueSummaries first.)
        guard windows[key] != nil || windows.count < capacity else { return true }
        windows[key] = Window(start: now, suppressed: 0)
        let due = now + interval
        if nextDue.map({ due < $0 }) ?? true { nextDue = due }
        return true
    }

    /// The counts of windows that have ended by `now`; those windows are forgotten.
    public mutating func dueSummaries(at now: ContinuousClock.Instant) -> [Summary] {
        guard let nextDue, now >= nextDue else { return [] }
        var summaries: [Summary] = []
        var earliest: ContinuousClock.Instant?
        for (key, window) in windows {
            if now - window.start >= interval {
                windows[key] = nil
                if window.suppressed > 0 { summaries.append(Summary(key: key, count: window.suppressed)) }
            } else {
                let due = window.start + interval
                if earliest.map({ due < $0 }) ?? true { earliest = due }
            }
        }
        self.nextDue = earliest
        return summaries
    }

    /// Every count not reported yet, whether or not its window has ended (at exit).
    public mutating func drainAll() -> [Summary] {
        let summaries = windows.compactMap { key, window in
            window.suppressed > 0 ? Summary(key: key, count: window.suppressed) : nil
        }
        windows = [:]
        nextDue = nil
        return summaries
    }
}
