#if canImport(Glibc)
import Glibc
#endif

/// The usual `process_*` families, read from `/proc/self` at scrape time (Linux):
/// `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
/// `process_open_fds`, `process_max_fds`, `process_start_time_seconds`.
///
/// Reading procfs costs no disk I/O: the kernel formats the figures on `read`.
public enum ProcessMetrics {
    /// Registers the collectors on `registry`.
    public static func register(on registry: MetricsRegistry) {
        let ticksPerSecond = Double(max(1, sysconf(Int32(_SC_CLK_TCK))))
        let pageSize = Double(max(1, sysconf(Int32(_SC_PAGESIZE))))
        let startTime = startTimeSeconds(ticksPerSecond: ticksPerSecond)
        registry.register(MetricsCollector(
            name: "process_cpu_seconds_total", type: .counter, help: "Total user and system CPU time spent in seconds."
        ) {
            guard let stat = ProcStat.read() else { return [] }
            return [MetricSample(value: (stat.userTicks + stat.systemTicks) / ticksPerSecond)]
        })
        registry.register(MetricsCollector(
            name: "process_resident_memory_bytes", type: .gauge, help: "Resident memory size in bytes."
        ) {
            guard let stat = ProcStat.read() else { return [] }
            return [MetricSample(value: stat.residentPages * pageSize)]
        })
        registry.register(MetricsCollector(
            name: "process_virtual_memory_bytes", type: .gauge, help: "Virtual memory size in bytes."
        ) {
            guard let stat = ProcStat.read() else { return [] }
            return [MetricSample(value: stat.virtualBytes)]
        })
        registry.register(MetricsCollector(
            name: "process_open_fds", type: .gauge, help: "Number of open file descriptors."
        ) {
            openFileDescriptors().map { [MetricSample(value: Double($0))] } ?? []
        })
        registry.register(MetricsCollector(
            name: "process_max_fds", type: .gauge, help: "Maximum number of open file descriptors."
        ) {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return [] }
            return [MetricSample(value: Double(limit.rlim_cur))]
        })
        if let startTime {
            registry.register(MetricsCollector(
                name: "process_start_time_seconds", type: .gauge,
                help: "Start time of the process since unix epoch in seconds."
            ) {
                [MetricSample(value: startTime)]
            })
        }
    }

    /// The entries of `/proc/self/fd`, minus the one `opendir` itself holds.
    static func openFileDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { name in
                name[0] == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
            }
            if !isDot { count += 1 }
        }
        return max(0, count - 1)
    }

    /// Boot time (`btime` of `/proc/stat`) plus the process' start in ticks since boot.
    private static func startTimeSeconds(ticksPerSecond: Double) -> Double? {
        guard let stat = ProcStat.read(), let text = ProcFile.read("/proc/stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            guard let bootTime = Double(line.dropFirst(6)) else { return nil }
            return bootTime + stat.startTicks / ticksPerSecond
        }
        return nil
    }
}

/// The fields of `/proc/self/stat` the process families use.
struct ProcStat {
    var userTicks: Double
    var systemTicks: Double
    var startTicks: Double
    var virtualBytes: Double
    var residentPages: Double

    /// Parses `/proc/self/stat`; the command name (field 2) may hold spaces and parentheses, so
    /// fields are counted from the last `)`.
    static func read() -> ProcStat? {
        guard let text = ProcFile.read("/proc/self/stat") else { return nil }
        return parse(text)
    }

    /// Works on the line's bytes: searching a `String` for `)` and splitting it go character by
    /// character (grapheme breaking), some hundred times the work for an ASCII line.
    static func parse(_ text: String) -> ProcStat? {
        let bytes = Array(text.utf8)
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // Field 3 (state) is index 0: utime is field 14, stime 15, starttime 22, vsize 23, rss 24.
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        func number(_ index: Int) -> Double? { Double(String(decoding: fields[index], as: UTF8.self)) }
        guard fields.count > 21, let user = number(11), let system = number(12),
              let start = number(19), let virtual = number(20), let resident = number(21)
        else { return nil }
        return ProcStat(userTicks: user, systemTicks: system, startTicks: start, virtualBytes: virtual, residentPages: resident)
    }
}

/// Reads a small procfs file whole (up to 1 MB): procfs reports sizes of 0 and one `read`
/// may return only part of a file, so it reads until end of file.
package enum ProcFile {
    /// The file's text, or nil when it cannot be opened.
    package static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
            if bytes.count > 1 << 20 { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
