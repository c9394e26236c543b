#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HTTP2

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
        let address = try SocketAddress.resolve(host: "127.0.0.1", port: port, passive: true)[0]
        descriptor = try address.bound(reusingAddress: true)
        self.port = SocketAddress.localPort(of: descriptor)
    }

    /// Frees the port.
    public func release() { close(descriptor) }
}
