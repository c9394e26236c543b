#if canImport(Glibc)
import Glibc
#endif
import Bridge
import Foundation
import Synchronization
import Observability

/// A `BridgePipeline` whose `run()` loop runs on a thread of its own (demo, benchmark, tests).
public final class BackgroundPipeline: Sendable {
    /// The pipeline.
    public let pipeline: BridgePipeline
    private let exit = Locked<Int32?>(nil)

    /// Builds the pipeline from `configuration` and starts its consumer loop.
    public init(configuration: BridgeConfiguration, backpressureGrace: Duration = .seconds(1)) throws {
        let pipeline = try BridgePipeline(configuration: configuration, backpressureGrace: backpressureGrace)
        self.pipeline = pipeline
        let thread = Thread { [self] in
            BackgroundPipeline.nameCurrentThread("bridge-consumer")
            let code = pipeline.run()
            exit.withLock { $0 = code }
        }
        thread.start()
    }

    /// The exit code once `run()` returned, nil while it runs.
    public var exitCode: Int32? {
        exit.withLock { $0 }
    }

    /// Asks the pipeline to stop and waits until `run()` returned (drain, flush, commit).
    /// - Returns: its exit code (0 after a clean stop).
    @discardableResult
    public func stop() -> Int32 {
        pipeline.requestStop()
        while true {
            if let code = exitCode { return code }
            usleep(10_000)
        }
    }

    /// Names the calling thread for the kernel (what `top -H`, perf and `ProcessCPUTimes` show):
    /// Foundation's `Thread.name` does not reach the kernel on Linux, and `prctl` is variadic.
    private static func nameCurrentThread(_ name: String) {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY)
        guard descriptor >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
    }
}
