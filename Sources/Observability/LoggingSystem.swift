#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Process-wide logging settings (the minimum level and the output format) and the writer every
/// `Logger` shares.
///
/// Identical warnings and errors (same level, component and message) repeated within
/// `repetitionInterval` are counted, not written; the count is written as
/// `<message> (repeated N times)` with the next log line after the interval, or by `flush()`.
public enum LoggingSystem {
    /// Output format of log lines.
    public enum Format: String, Sendable {
        case json, text
    }

    private struct State {
        var format: Format = .text
        var descriptor: Int32 = 2
        var repetitions = LogRepetitionFilter()
    }

    private static let state = Locked(State())
    private static let levelRaw = Atomic<Int>(Logger.Level.info.rawValue)

    /// The minimum level written.
    public static var level: Logger.Level {
        Logger.Level(rawValue: levelRaw.load(ordering: .relaxed)) ?? .info
    }

    /// Sets the minimum level and the format for every logger in the process.
    /// - Parameters:
    ///   - descriptor: where lines go (default 2, standard error).
    ///   - repetitionInterval: how long identical warnings and errors are counted instead of written.
    public static func bootstrap(level: Logger.Level, format: Format, descriptor: Int32 = 2,
                                 repetitionInterval: Duration = LogRepetitionFilter.defaultInterval) {
        let pending: [LogRepetitionFilter.Summary] = state.withLock {
            let pending = $0.repetitions.drainAll()
            $0.format = format
            $0.descriptor = descriptor
            $0.repetitions = LogRepetitionFilter(interval: repetitionInterval)
            return pending
        }
        levelRaw.store(level.rawValue, ordering: .relaxed)
        writeSummaries(pending)
    }

    /// Writes the counts of repeated events not reported yet (call before the process exits).
    public static func flush() {
        writeSummaries(state.withLock { $0.repetitions.drainAll() })
    }

    static func write(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        let (format, descriptor, due, admitted) = state.withLock { state in
            let due = state.repetitions.dueSummaries(at: now)
            let admitted = level < .warning
                || state.repetitions.admit(.init(level: level, label: label, message: message), at: now)
            return (state.format, state.descriptor, due, admitted)
        }
        writeSummaries(due)
        guard admitted else { return }
        let line = LogLineFormatter.format(
            format: format, timeMilliseconds: Timestamp.nowMilliseconds(), level: level, label: label,
            message: message, metadata: metadata.map { ($0.key, $0.value) }
        )
        writeLine(line, to: descriptor)
    }

    private static func writeSummaries(_ summaries: [LogRepetitionFilter.Summary]) {
        guard !summaries.isEmpty else { return }
        let (format, descriptor) = state.withLock { ($0.format, $0.descriptor) }
        for summary in summaries {
            let line = LogLineFormatter.format(
                format: format, timeMilliseconds: Timestamp.nowMilliseconds(), level: summary.key.level,
                label: summary.key.label, message: "\(summary.key.message) (repeated \(summary.count) times)",
                metadata: format == .json ? [("repeated", "\(summary.count)")] : []
            )
            writeLine(line, to: descriptor)
        }
    }

    /// The whole line in one `write(2)` (repeated only if the kernel takes part of it), so lines of
    /// different threads do not interleave.
    private static func writeLine(_ line: String, to descriptor: Int32) {
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                // invariant: the line is never empty (it ends with a newline).
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }
}
