#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// An error of the HTTP2 module: socket, name resolution, TLS or HTTP/2 failures.
///
/// `code` is stable and machine-readable; `message` is for humans and logs (it never contains
/// keys or passphrases).
public struct HTTP2Error: Error, Sendable, Equatable, CustomStringConvertible {
    /// The failure category.
    public enum Code: String, Sendable {
        /// A system call on a socket, epoll or eventfd failed.
        case system
        /// The host name could not be resolved.
        case resolution
        /// Loading certificates or keys, or creating a TLS context, failed.
        case tlsConfiguration
        /// The TLS handshake failed (including certificate verification and ALPN).
        case tlsHandshake
        /// Generating test certificates failed.
        case certificateGeneration
        /// nghttp2 rejected an operation.
        case http2
    }

    /// The failure category.
    public let code: Code
    /// A human-readable explanation.
    public let message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }

    /// An error for a failed system call, with `errno`'s text.
    package static func system(_ call: String, errno number: Int32 = errno) -> HTTP2Error {
        HTTP2Error(.system, "\(call) failed: \(String(cString: strerror(number)))")
    }

    /// An error carrying the text of OpenSSL's error queue (which it drains).
    package static func openSSL(_ code: Code, _ what: String) -> HTTP2Error {
        HTTP2Error(code, "\(what): \(OpenSSLErrors.drain())")
    }
}

/// Reading OpenSSL's thread-local error queue.
package enum OpenSSLErrors {
    /// Returns the queued OpenSSL errors as one line and clears the queue.
    package static func drain() -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [UInt8](repeating: 0, count: 256)
            buffer.withUnsafeMutableBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { ERR_error_string_n(code, $0.baseAddress, $0.count) }
            }
            parts.append(String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self))
        }
        return parts.isEmpty ? "no OpenSSL error detail" : parts.joined(separator: "; ")
    }
}
