#if canImport(Glibc)
import Glibc
#endif

/// Facts about the machine the bridge runs on.
enum SystemInfo {
    /// Processors online (at least 1): one event loop thread per core.
    static var onlineProcessorCount: Int {
        max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }

    /// This instance's name among the group's members: `$APNS_BRIDGE_INSTANCE_ID`, else the host
    /// name (a pod's name in Kubernetes), else "apns-bridge". Stable across restarts of the same
    /// instance, so its transactional id is too.
    static var instanceID: String {
        if let value = getenv("APNS_BRIDGE_INSTANCE_ID").map({ String(cString: $0) }), !value.isEmpty {
            return value
        }
        var name = [CChar](repeating: 0, count: 256)
        if gethostname(&name, name.count - 1) == 0 {
            let host = String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !host.isEmpty { return host }
        }
        return "apns-bridge"
    }
}
