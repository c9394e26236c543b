import Foundation

/// Polls `condition` until it holds or `timeout` passes: the one way tests wait.
///
/// Tests never sleep a fixed time: they wait for the condition they need, and a deadline makes a
/// missing condition a failure instead of a hang.
/// - Returns: whether the condition held before the deadline.
public func eventually(
    timeout: Duration = .seconds(15),
    every interval: Duration = .milliseconds(5),
    _ condition: () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: interval)
    }
    return true
}

/// `eventually` for a condition that must itself await (e.g. a hop to an event loop).
public func eventuallyAsync(
    timeout: Duration = .seconds(15),
    every interval: Duration = .milliseconds(5),
    _ condition: () async -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while await !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: interval)
    }
    return true
}

/// The blocking form of `eventually`, for code that runs on a thread of its own (process
/// watchers, synchronous helpers). Never call it from an event loop.
public func waitFor(
    timeout: Duration = .seconds(15),
    every interval: Duration = .milliseconds(5),
    _ condition: () -> Bool
) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        Thread.sleep(forTimeInterval: Double(interval.components.attoseconds) / 1e18 + Double(interval.components.seconds))
    }
    return true
}

/// A fresh temporary directory for one test, removed by `remove()`.
public struct ScratchDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates `$TMPDIR/<prefix>-<uuid>`.
    public init(prefix: String = "apns-bridge-test") throws {
        path = NSTemporaryDirectory() + prefix + "-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func file(_ name: String) -> String {
        path + "/" + name
    }

    /// Deletes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
