#if canImport(Glibc)
import Glibc
#endif
import BridgeLocal
import Testing

/// The peak RSS the bench reports for an instance is the instance's own, however much memory the
/// benchmark process itself has used (it holds the mock cluster, the simulator and every
/// workload, and `bench --targets` makes seven runs in it).
@Suite(.serialized)
struct InstancePeakMemoryTests {
    @Test func anInstancesPeakMemoryIsItsOwnNotTheBenchmarkProcesss() throws {
        // This process, the parent, touches 300 MB first: a child started with posix_spawn
        // carries that high-water mark in wait4's ru_maxrss.
        let bytes = 300 << 20
        let block = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 4096)
        defer { block.deallocate() }
        for offset in stride(from: 0, to: bytes, by: 4096) {
            block.storeBytes(of: 1, toByteOffset: offset, as: UInt8.self)
        }
        #expect(ProcessCPUTimes.sample().maxResidentMegabytes >= 300)
        // An instance whose wrapper runs a shell that becomes `sleep` instead of the bridge (the
        // `apns-bridge run --config …` words appended to it are the script's unused arguments).
        let instance = try BridgeProcess(executable: "apns-bridge", yaml: "", instanceID: "memory",
                                         wrapper: ["/bin/sh", "-c", "exec sleep 30"])
        let ended = BenchmarkRunner.stop([instance])
        #expect(ended.count == 1)
        #expect(ended.first?.exitCode == 128 + SIGTERM)
        let megabytes = try #require(ended.first?.maxResidentMegabytes)
        #expect(megabytes > 0 && megabytes < 64, "a shell and sleep reported at \(megabytes) MB")
        // The block stays in use until the instance was measured.
        #expect(block.load(fromByteOffset: bytes - 4096, as: UInt8.self) == 1)
    }
}
