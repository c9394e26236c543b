#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2  // `timespec`: the shim's system headers define it for this module too
import Synchronization

/// A handle to a task scheduled with ``EventLoop/schedule(afterNanoseconds:_:)``.
///
/// Cancel it with ``EventLoop/cancel(_:)`` from any thread. Cancelling a timer that already fired
/// does nothing.
public final class EventLoopTimer: Sendable {
    /// Set once the timer was cancelled; the loop skips cancelled timers when they come due.
    let cancelled = Atomic<Bool>(false)
    /// Set once the loop ran (or skipped) the timer.
    let finished = Atomic<Bool>(false)

    init() {}
}

/// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`).
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// The monotonic clock as of the kernel's last tick (`CLOCK_MONOTONIC_COARSE`): at most a tick
/// (1-10 ms) behind, never ahead of a `monotonicNanoseconds()` read after it, and about a quarter
/// of its cost (5 against 22 ns here). For the stamps a connection takes per stream and per frame
/// and compares in seconds: a stream's start (its timeout) and the last frame (PING liveness).
@inline(__always)
func coarseMonotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// The loop's pending timers: a binary min-heap ordered by deadline, then by scheduling order.
///
/// Thread ownership: only the loop thread touches it. Cancelled timers are removed lazily
/// (skipped when due) and compacted when they make up most of the heap.
struct TimerHeap {
    struct Entry {
        var deadline: UInt64
        var sequence: UInt64
        var timer: EventLoopTimer
        var task: @Sendable () -> Void

        @inline(__always)
        func isBefore(_ other: Entry) -> Bool {
            deadline != other.deadline ? deadline < other.deadline : sequence < other.sequence
        }
    }

    private var entries: [Entry] = []
    private var nextSequence: UInt64 = 0
    private var cancelledCount = 0

    /// The number of pending entries, cancelled ones included.
    var count: Int { entries.count }

    /// The deadline of the earliest entry.
    var earliestDeadline: UInt64? { entries.first?.deadline }

    /// Adds a timer.
    mutating func insert(deadline: UInt64, timer: EventLoopTimer, task: @escaping @Sendable () -> Void) {
        entries.append(Entry(deadline: deadline, sequence: nextSequence, timer: timer, task: task))
        nextSequence &+= 1
        siftUp(entries.count - 1)
    }

    /// Removes and returns the earliest entry if it is due at `now`.
    mutating func popDue(now: UInt64) -> Entry? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            siftDown(0)
        }
        return first
    }

    /// Records that a pending timer was cancelled; compacts when cancelled entries dominate.
    mutating func noteCancelled() {
        cancelledCount += 1
        if cancelledCount > 256 && cancelledCount * 2 > entries.count {
            entries.removeAll { $0.timer.cancelled.load(ordering: .relaxed) }
            cancelledCount = 0
            var index = entries.count / 2
            while index > 0 {
                index -= 1
                siftDown(index)
            }
        }
    }

    /// Drops every entry (used when the loop stops).
    mutating func removeAll() {
        entries.removeAll()
        cancelledCount = 0
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].isBefore(entries[parent]) else { return }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let count = entries.count
        while true {
            let left = 2 * parent + 1
            if left >= count { return }
            var smallest = left
            let right = left + 1
            if right < count && entries[right].isBefore(entries[left]) { smallest = right }
            guard entries[smallest].isBefore(entries[parent]) else { return }
            entries.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
