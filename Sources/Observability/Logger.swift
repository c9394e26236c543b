#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A small structured logger with swift-log's shape: `logger.info("message", metadata: [...])`.
///
/// Output goes to standard error, one line per event, as JSON or as text (`LoggingSystem`).
/// Messages and metadata are built lazily, so a disabled level costs one comparison.
/// Device tokens must be passed through `Redact.token(_:)`; keys, passphrases and JWTs are
/// never logged.
public struct Logger: Sendable {
    /// Severity, lowest first. Names match the configuration's `log.level`.
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case trace, debug, info, warning, error

        /// The configuration spelling of the level.
        public var name: String {
            switch self {
            case .trace: "trace"
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }

        /// Parses a configuration spelling (`trace` … `error`), or nil.
        public init?(name: String) {
            guard let level = Level.allCases.first(where: { $0.name == name }) else { return nil }
            self = level
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Structured key/value pairs attached to one event.
    public typealias Metadata = KeyValuePairs<String, String>

    /// The component that logs, e.g. `kafka.consumer`.
    public let label: String

    /// Creates a logger for a component.
    public init(label: String) {
        self.label = label
    }

    /// Whether events at `level` are written.
    @inline(__always)
    public func isEnabled(_ level: Level) -> Bool {
        level >= LoggingSystem.level
    }

    /// Writes an event at `level` if that level is enabled.
    public func log(_ level: Level, _ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        guard isEnabled(level) else { return }
        LoggingSystem.write(level: level, label: label, message: message(), metadata: metadata())
    }

    public func trace(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.trace, message(), metadata: metadata())
    }
    public func debug(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.debug, message(), metadata: metadata())
    }
    public func info(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.info, message(), metadata: metadata())
    }
    public func warning(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.warning, message(), metadata: metadata())
    }
    public func error(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.error, message(), metadata: metadata())
    }
}

/// Process-wide logging settings: the minimum level and the output format.
public enum LoggingSystem {
    /// Output format of log lines.
    public enum Format: String, Sendable {
        case json, text
    }

    private struct Settings {
        var level: Logger.Level = .info
        var format: Format = .text
    }

    private static let settings = Locked(Settings())
    private static let levelRaw = Atomic<Int>(Logger.Level.info.rawValue)

    /// The minimum level written.
    public static var level: Logger.Level {
        Logger.Level(rawValue: levelRaw.load(ordering: .relaxed)) ?? .info
    }

    /// Sets the minimum level and the format for every logger in the process.
    public static func bootstrap(level: Logger.Level, format: Format) {
        settings.withLock {
            $0.level = level
            $0.format = format
        }
        levelRaw.store(level.rawValue, ordering: .relaxed)
    }

    static func write(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) {
        let format = settings.withLock { $0.format }
        let time = Timestamp.iso8601(Timestamp.nowMilliseconds())
        var line: String
        switch format {
        case .json:
            line = "{\"time\":\"\(time)\",\"level\":\"\(level.name)\",\"logger\":"
            JSONText.appendQuoted(label, to: &line)
            line += ",\"message\":"
            JSONText.appendQuoted(message, to: &line)
            for (key, value) in metadata {
                line += ","
                JSONText.appendQuoted(key, to: &line)
                line += ":"
                JSONText.appendQuoted(value, to: &line)
            }
            line += "}\n"
        case .text:
            line = "\(time) \(level.name.uppercased()) [\(label)] \(message)"
            for (key, value) in metadata {
                line += " \(key)=\(value)"
            }
            line += "\n"
        }
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            _ = Glibc.write(2, buffer.baseAddress, buffer.count)
        }
    }
}

/// Shortening of secrets-adjacent values before they reach a log line.
public enum Redact {
    /// A device token shortened to its first 8 digits, as the contract requires in logs.
    public static func token(_ token: String) -> String {
        token.count <= 8 ? token : String(token.prefix(8)) + "…"
    }
}
