import Glibc
import HTTP2
import Kafka

extension MockKafkaCluster {
    /// Turns Nagle's algorithm off (`TCP_NODELAY`) on the mock brokers' sockets, as Kafka's
    /// brokers do on every connection they accept; librdkafka 2.0.2's mock leaves it on.
    ///
    /// With it on, a response waits behind an earlier one the client has not acknowledged yet,
    /// and a client with nothing to send acknowledges only when its delayed-ACK timer fires: the
    /// benchmark saw single fetches wait 44 ms for records produced long before. The cluster runs
    /// in this process, so its sockets are this process's descriptors whose local port is a
    /// broker's: the listening sockets (connections accepted later inherit the option from them)
    /// and the connections accepted so far.
    /// - Returns: the descriptors changed.
    @discardableResult
    public func disableNagle() -> [Int32] {
        let brokerPorts = Set(bootstrapServers.split(separator: ",").compactMap { server in
            server.split(separator: ":").last.flatMap { Int($0) }
        })
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        var changed: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let descriptor = Int32(name), brokerPorts.contains(SocketAddress.localPort(of: descriptor)) {
                SocketAddress.setNoDelay(descriptor)
                changed.append(descriptor)
            }
        }
        return changed
    }
}
