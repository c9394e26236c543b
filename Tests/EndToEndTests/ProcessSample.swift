import Foundation
import Metrics

/// What `/proc/<pid>` says about a running process: resident memory, open descriptors, threads.
struct ProcessSample: Sendable {
    /// `VmRSS` of /proc/<pid>/status, in kB.
    let residentKilobytes: Int
    /// `VmHWM` of /proc/<pid>/status, in kB: the highest `VmRSS` so far.
    var peakResidentKilobytes = 0
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
        guard let resident = field("VmRSS"), let peak = field("VmHWM"), let threads = field("Threads") else { return nil }
        residentKilobytes = resident
        peakResidentKilobytes = peak
        openDescriptors = descriptors.count
        self.threads = threads
    }

    /// The paths of the files `pid` has mapped (/proc/<pid>/maps, read to its end).
    static func mappedFiles(pid: Int32) -> Set<String> {
        let lines = (ProcFile.read("/proc/\(pid)/maps") ?? "").split(separator: "\n")
        return Set(lines.compactMap { line in line.firstIndex(of: "/").map { String(line[$0...]) } })
    }

    init(residentKilobytes: Int, openDescriptors: Int, threads: Int) {
        self.residentKilobytes = residentKilobytes
        self.openDescriptors = openDescriptors
        self.threads = threads
    }
}
