import Bridge
import Foundation

/// CPU time used by this process (`getrusage`) or a child (`/proc/<pid>/stat`), in total and by
/// each live thread (`/proc/<pid>/task/<tid>/stat`), so a benchmark can say where the time went.
public struct ProcessCPUTimes: Sendable {
    /// User + system CPU seconds of the whole process.
    public var processSeconds: Double
    /// Peak resident set size in megabytes.
    public var maxResidentMegabytes: Double
    /// CPU seconds of every live thread by thread id, with the thread's name.
    public var threads: [Int32: (name: String, seconds: Double)]

    /// Samples the process now.
    public static func sample() -> ProcessCPUTimes {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let seconds = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return ProcessCPUTimes(processSeconds: seconds, maxResidentMegabytes: Double(usage.ru_maxrss) / 1024,
                               threads: threadTimes(of: "self"))
    }

    /// Samples another process of this user now (the `apns-bridge run` children of the benchmark):
    /// its CPU time and its threads' from /proc, its peak RSS from `VmHWM`. Zero when it is gone.
    public static func sample(pid: Int32) -> ProcessCPUTimes {
        let seconds = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)).flatMap(statSeconds) ?? 0
        return ProcessCPUTimes(processSeconds: seconds,
                               maxResidentMegabytes: MemoryBenchmark.residentMegabytes(pid: pid, field: "VmHWM"),
                               threads: threadTimes(of: "\(pid)"))
    }

    /// CPU seconds spent since `earlier`, by thread name with numeric suffixes folded together
    /// (`apns-loop-0` and `apns-loop-1` → `apns-loop`), largest first. Threads that ended in
    /// between are missing.
    public func threadGroups(since earlier: ProcessCPUTimes) -> [(name: String, seconds: Double)] {
        var groups: [String: Double] = [:]
        for (id, thread) in threads {
            let before = earlier.threads[id].map { $0.name == thread.name ? $0.seconds : 0 } ?? 0
            groups[Self.groupName(thread.name), default: 0] += max(0, thread.seconds - before)
        }
        return groups.map { (name: $0.key, seconds: $0.value) }.filter { $0.seconds > 0 }.sorted { $0.seconds > $1.seconds }
    }

    /// A thread name without its trailing number and separator.
    static func groupName(_ name: String) -> String {
        var trimmed = Substring(name)
        while let last = trimmed.last, last.isNumber { trimmed = trimmed.dropLast() }
        while let last = trimmed.last, last == "-" || last == "_" || last == "#" { trimmed = trimmed.dropLast() }
        return trimmed.isEmpty ? name : String(trimmed)
    }

    private static func threadTimes(of process: String) -> [Int32: (name: String, seconds: Double)] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task") else {
            return [:]
        }
        var result: [Int32: (name: String, seconds: Double)] = [:]
        for entry in entries {
            guard let id = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(process)/task/\(entry)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")"),
                  let seconds = statSeconds(stat) else { continue }
            result[id] = (name: String(stat[stat.index(after: open)..<close]), seconds: seconds)
        }
        return result
    }

    /// utime + stime of a `/proc/…/stat` line in seconds.
    static func statSeconds(_ stat: String) -> Double? {
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard ticksPerSecond > 0, let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the name: state (3), …, utime (14), stime (15).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / ticksPerSecond
    }
}
