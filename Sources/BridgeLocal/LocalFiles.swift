import Bridge
#if canImport(Glibc)
import Glibc
#endif

/// Temporary folders for generated local credentials (demo, tests, benchmark).
public enum LocalFiles {
    /// A folder could not be created.
    public struct FileError: Error, CustomStringConvertible {
        /// What failed, with the errno text.
        public var description: String
    }

    /// A new empty folder under /tmp, e.g. `/tmp/apns-bridge-Ab12Cd`.
    public static func makeTemporaryDirectory(prefix: String) throws -> String {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) }.map { String(cString: $0) }
        }
        guard let created else {
            throw FileError(description: "cannot create a temporary folder: \(String(cString: strerror(errno)))")
        }
        return created
    }

    /// Removes the files directly inside `directory`, then the folder itself.
    public static func removeDirectory(_ directory: String) {
        guard let handle = opendir(directory) else { return }
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." {
                unlink(directory + "/" + name)
            }
        }
        closedir(handle)
        rmdir(directory)
    }
}
