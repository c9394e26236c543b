#if canImport(Glibc)
import Glibc
#endif

/// A small structured logger with swift-log's shape: `logger.info("message", metadata: [...])`.
///
/// Output goes to standard error, one line per event, as JSON or as text (`LoggingSystem`,
/// `LogLineFormatter`: text escapes control characters, so logged input cannot forge lines).
/// Messages and metadata are built lazily, so a disabled level costs one comparison. Identical
/// warnings and errors repeated within a few seconds are counted instead of written
/// (`LogRepetitionFilter`). Device tokens must be passed through `Redact.token(_:)`; keys,
/// passphrases and JWTs are never logged.
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
