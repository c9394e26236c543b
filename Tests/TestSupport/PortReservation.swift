#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Holds a loopback port bound but not listening: connecting to it is refused, and no other
/// socket picks it as an ephemeral port, yet a server with SO_REUSEADDR (`HTTP2Server`) may listen
/// on it. Keeps tests running in parallel from stealing the port of a stopped simulator.
/// Call `release()` when done.
public final class PortReservation {
    public let port: Int
    private let descriptor: Int32

    /// Reserves `port`, or an ephemeral port when 0: a stopped server's port can be held until a
    /// new server takes it over.
    public init(port: Int = 0) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var one: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(descriptor, address, length) == 0 && getsockname(descriptor, address, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Frees the port.
    public func release() { close(descriptor) }
}
