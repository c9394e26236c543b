#if canImport(Glibc)
import Glibc
#endif

/// Facts about the machine the bridge runs on.
enum SystemInfo {
    /// Processors online (at least 1): one event loop thread per core.
    static var onlineProcessorCount: Int {
        max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }
}
