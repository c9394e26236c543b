#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HTTP2

/// A TCP port on 127.0.0.1 for a child process to listen on, chosen where the kernel never hands
/// out ports by itself: below the ephemeral range (`net.ipv4.ip_local_port_range`, 32768–60999 by
/// default), so that no socket another process binds to port 0 or connects from can take it
/// between the choice and the child's `listen`. Random in 20000–(range start − 1) and checked
/// free by binding it; several processes on one machine (the benchmark's instances, test
/// processes running side by side) then collide only if two pick the same port in the same
/// moment. Falls back to a port the kernel picks when no port there is free.
public enum LoopbackPort {
    /// The lowest port chosen.
    static let lowest = 20_000

    /// A port that was free a moment ago and that the kernel does not hand out by itself.
    public static func unused() throws -> Int {
        let limit = min(ephemeralRangeStart(), 65_536)
        if limit > lowest {
            for _ in 0..<64 {
                let port = Int.random(in: lowest..<limit)
                if bindable(port) != nil { return port }
            }
        }
        guard let port = bindable(0) else {
            throw POSIXError(.EADDRINUSE)
        }
        return port
    }

    /// The first port of the kernel's ephemeral range (32768 when it cannot be read).
    static func ephemeralRangeStart() -> Int {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32_768
    }

    /// Binds 127.0.0.1:`port` (0: any) without SO_REUSEADDR and releases it: the port bound, or
    /// nil when it is taken.
    static func bindable(_ port: Int) -> Int? {
        guard let address = try? SocketAddress.resolve(host: "127.0.0.1", port: port, passive: true).first,
              let descriptor = try? address.bound(reusingAddress: false) else { return nil }
        defer { close(descriptor) }
        return SocketAddress.localPort(of: descriptor)
    }
}
