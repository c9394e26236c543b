import Foundation

/// What `/proc/<pid>` says about a running process: resident memory, open descriptors, threads.
struct ProcessSample: Sendable {
    /// `VmRSS` of /proc/<pid>/status, in kB.
    let residentKilobytes: Int
    /// Entries of /proc/<pid>/fd.
    let openDescriptors: Int
    /// `Threads` of /proc/<pid>/status.
    let threads: Int

    /// Reads the sample of `pid`; nil once the process is gone.
    init?(pid: Int32) {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
        func field(_ name: String) -> Int? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Int($0) }
        }
        guard let resident = field("VmRSS"), let threads = field("Threads") else { return nil }
        residentKilobytes = resident
        openDescriptors = descriptors.count
        self.threads = threads
    }

    init(residentKilobytes: Int, openDescriptors: Int, threads: Int) {
        self.residentKilobytes = residentKilobytes
        self.openDescriptors = openDescriptors
        self.threads = threads
    }
}
