#if canImport(Glibc)
import Glibc
#endif
import HTTP2

/// A loopback TCP port that listens and never accepts: a connection made to it waits in the
/// backlog, where ``hasWaitingConnection`` sees it. Stands in for a server that must not be
/// contacted. Call `close()` when done.
public final class UnansweredListener: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init() throws {
        let address = try SocketAddress.resolve(host: "127.0.0.1", port: 0, passive: true)[0]
        descriptor = try address.listen(backlog: 16)
        port = SocketAddress.localPort(of: descriptor)
    }

    /// Whether a connection has been made (a listening socket is readable while one waits).
    public var hasWaitingConnection: Bool {
        var descriptor = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }

    public func close() { Glibc.close(descriptor) }
}
