#if canImport(Glibc)
import Glibc
#endif

/// Checks a file the configuration names before OpenSSL or a parser reads it: a FIFO or a
/// device would block the reader or never end, a directory gives a misleading error, and a huge
/// file would be read whole. Symbolic links are followed (a loop is reported as such).
package enum ReadableFile {
    /// The largest certificate, key, CA bundle or PKCS#12 file taken.
    package static let credentialMaximumBytes = 16 << 20

    /// nil when `path` names a regular file of at most `maximumBytes`; otherwise what is wrong
    /// with it, e.g. "is a directory" or the system's "No such file or directory".
    package static func problem(at path: String, maximumBytes: Int = credentialMaximumBytes) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return String(cString: strerror(errno)) }
        switch status.st_mode & S_IFMT {
        case S_IFREG:
            return Int(status.st_size) > maximumBytes ? "is larger than \(maximumBytes) bytes" : nil
        case S_IFDIR:
            return "is a directory"
        default:
            return "is not a regular file"
        }
    }
}
