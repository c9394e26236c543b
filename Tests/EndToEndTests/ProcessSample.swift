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

    /// The paths of the files `pid` has mapped (/proc/<pid>/maps), read to its end: the kernel
    /// reports the file's size as 0, and one read returns only part of it.
    static func mappedFiles(pid: Int32) -> Set<String> {
        let descriptor = open("/proc/\(pid)/maps", O_RDONLY)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            contents += chunk[..<count]
        }
        let lines = String(decoding: contents, as: UTF8.self).split(separator: "\n")
        return Set(lines.compactMap { line in line.firstIndex(of: "/").map { String(line[$0...]) } })
    }

    init(residentKilobytes: Int, openDescriptors: Int, threads: Int) {
        self.residentKilobytes = residentKilobytes
        self.openDescriptors = openDescriptors
        self.threads = threads
    }
}
