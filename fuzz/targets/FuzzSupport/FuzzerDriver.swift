#if canImport(Glibc)
import Glibc
#endif
import CLibFuzzer

/// The body run for each input; set once by ``runFuzzer(_:)`` before libFuzzer starts.
nonisolated(unsafe) private var testOneInputBody: ([UInt8]) -> Void = { _ in }

/// libFuzzer's per-input entry point. The runtime's own `main` references it, so it must exist
/// even though ``runFuzzer(_:)`` passes it to the driver explicitly.
@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    testOneInputBody(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

/// Hands the process to libFuzzer, which calls `body` with each input (arguments as libFuzzer
/// takes them: corpus directories, `-max_total_time=N`, a crash file to replay…). Never returns.
///
/// SwiftPM links an executable's `main` to the module's own entry point, so the target's `@main`
/// runs first and starts libFuzzer through `LLVMFuzzerRunDriver`.
public func runFuzzer(_ body: @escaping ([UInt8]) -> Void) -> Never {
    testOneInputBody = body
    exit(apns_fuzz_run_driver(CommandLine.argc, CommandLine.unsafeArgv) { data, size in testOneInput(data, size) })
}
