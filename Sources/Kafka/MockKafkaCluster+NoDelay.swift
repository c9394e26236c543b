import Glibc

extension MockKafkaCluster {
    /// Turns Nagle's algorithm off (`TCP_NODELAY`) on the connections the mock brokers have
    /// accepted so far, as Kafka's brokers do on every connection they accept.
    ///
    /// librdkafka 2.0.2's mock brokers leave it on. A response then waits behind an earlier one
    /// the client has not acknowledged yet, and a client with nothing to send acknowledges only
    /// when its delayed-ACK timer fires: the benchmark saw single fetches wait 44 ms for records
    /// that had long been produced. The cluster runs in this process, so its sockets are found
    /// among this process's descriptors: connected TCP sockets whose local port is a broker's.
    /// Connections accepted later keep Nagle's algorithm; call this once clients are connected.
    /// - Returns: the descriptors changed.
    @discardableResult
    public func disableNagleOnAcceptedConnections() -> [Int32] {
        acceptedConnections().filter { descriptor in
            var on: Int32 = 1
            return setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
        }
    }

    /// The descriptors of the connections the mock brokers have accepted and not closed.
    public func acceptedConnections() -> [Int32] {
        let brokerPorts = Set(bootstrapServers.split(separator: ",").compactMap { server in
            server.split(separator: ":").last.flatMap { UInt16($0) }
        })
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        var accepted: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let descriptor = Int32(name), let port = Self.localPort(of: descriptor), brokerPorts.contains(port),
               Self.hasPeer(descriptor) {
                accepted.append(descriptor)
            }
        }
        return accepted
    }

    /// The local port of an IPv4 socket; nil for anything else (or a descriptor closed meanwhile).
    private static func localPort(of descriptor: Int32) -> UInt16? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether the socket is connected (an accepted connection, not the listening socket).
    private static func hasPeer(_ descriptor: Int32) -> Bool {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        } == 0
    }
}
