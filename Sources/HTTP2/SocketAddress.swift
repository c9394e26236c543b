#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2

/// A resolved socket address plus the socket helpers used by clients and servers.
package struct SocketAddress: Sendable {
    var storage: sockaddr_storage
    var length: socklen_t

    var family: Int32 { Int32(storage.ss_family) }

    /// Whether `host` is an IPv4 or IPv6 literal (then it is verified as an IP SAN, without SNI).
    package static func isIPLiteral(_ host: String) -> Bool {
        var buffer = in6_addr()
        return inet_pton(AF_INET, host, &buffer) == 1 || inet_pton(AF_INET6, host, &buffer) == 1
    }

    /// Resolves `host` and `port` to TCP addresses with `getaddrinfo` (blocking; call it off-loop
    /// for names).
    /// - Parameter passive: resolve for `bind` (a nil-like wildcard host is allowed).
    /// - Throws: ``HTTP2Error`` with code `.resolution`.
    package static func resolve(host: String, port: Int, passive: Bool = false) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = passive ? AI_PASSIVE : AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let result = getaddrinfo(host, String(port), &hints, &list)
        guard result == 0, let list else {
            throw HTTP2Error(.resolution, "cannot resolve \(host): \(String(cString: gai_strerror(result)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            if let address = entry.pointee.ai_addr {
                var storage = sockaddr_storage()
                let length = entry.pointee.ai_addrlen
                withUnsafeMutableBytes(of: &storage) { target in
                    target.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length)))
                }
                addresses.append(SocketAddress(storage: storage, length: length))
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw HTTP2Error(.resolution, "no address for \(host)") }
        return addresses
    }

    /// A new non-blocking, close-on-exec TCP socket for this address family.
    func makeSocket() throws -> Int32 {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTP2Error.system("socket") }
        return fd
    }

    /// TCP keep-alive on a client socket: probes after 30 s idle, every 10 s, 3 misses close it.
    /// A backstop under the HTTP/2 PING (which finds a silent peer first, in seconds).
    static func enableKeepAlive(_ fd: Int32) {
        var on: Int32 = 1, idle: Int32 = 30, interval: Int32 = 10, count: Int32 = 3
        let size = socklen_t(MemoryLayout<Int32>.size)
        _ = setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, size)
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE, &idle, size)
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL, &interval, size)
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT, &count, size)
    }

    /// Starts a non-blocking connect. Returns the socket; completion shows as writability.
    package func startConnect() throws -> Int32 {
        let fd = try makeSocket()
        Self.enableKeepAlive(fd)
        var storage = self.storage
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        if result != 0 && errno != EINPROGRESS {
            let error = HTTP2Error.system("connect")
            close(fd)
            throw error
        }
        return fd
    }

    /// Binds a listening socket (SO_REUSEADDR) with the given backlog.
    package func listen(backlog: Int32) throws -> Int32 {
        let fd = try bound(reusingAddress: true)
        guard Glibc.listen(fd, backlog) == 0 else {
            let error = HTTP2Error.system("listen")
            close(fd)
            throw error
        }
        return fd
    }

    /// A socket bound to this address, not listening: with SO_REUSEADDR when `reusingAddress`.
    package func bound(reusingAddress: Bool) throws -> Int32 {
        let fd = try makeSocket()
        if reusingAddress {
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        var storage = self.storage
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard result == 0 else {
            let error = HTTP2Error.system("bind")
            close(fd)
            throw error
        }
        return fd
    }

    /// The local port a socket is bound to.
    package static func localPort(of fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return withUnsafeBytes(of: &storage) { bytes in
            // sin_port and sin6_port sit at the same offset (2), in network byte order.
            Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
        }
    }

    /// Disables Nagle's algorithm (we coalesce output ourselves).
    package static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// The pending error of a socket (`SO_ERROR`), 0 when none.
    static func pendingError(of fd: Int32) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) != 0 { return errno }
        return value
    }
}
