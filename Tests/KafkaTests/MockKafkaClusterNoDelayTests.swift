import Glibc
import Kafka
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct MockKafkaClusterNoDelayTests {
    /// The mock brokers accept connections with Nagle's algorithm on (unlike Kafka's); the
    /// benchmark turns it off on them, and only on them: the client's own socket in this
    /// process is left as it was.
    @Test func nagleIsTurnedOffOnTheBrokersAcceptedConnectionsOnly() throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("nodelay", partitions: 1)
        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: KafkaTestSupport.logger,
            deliveryHandler: { _, _ in })
        defer { producer.close() }
        try KafkaTestSupport.produce(producer, topic: "nodelay", count: 1)
        #expect(producer.flush(timeoutMilliseconds: 10_000))  // delivered: the broker accepted the connection

        let accepted = cluster.acceptedConnections()
        #expect(!accepted.isEmpty)
        #expect(accepted.allSatisfy { Self.noDelay($0) == 0 })
        let brokerPort = try #require(cluster.bootstrapServers.split(separator: ":").last.flatMap { UInt16($0) })
        let clientSockets = Self.tcpSockets(connectedTo: brokerPort)
        #expect(!clientSockets.isEmpty)  // the producer's end of the connection
        let clientBefore = clientSockets.map { Self.noDelay($0) }

        #expect(Set(cluster.disableNagleOnAcceptedConnections()) == Set(accepted))
        #expect(accepted.allSatisfy { Self.noDelay($0) == 1 })
        #expect(clientSockets.map { Self.noDelay($0) } == clientBefore)
    }

    static func noDelay(_ descriptor: Int32) -> Int32 {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length) == 0 else { return -1 }
        return value
    }

    /// This process's IPv4 TCP sockets connected to `port` (clients of the broker).
    static func tcpSockets(connectedTo port: UInt16) -> [Int32] {
        (0..<1024).map(Int32.init).filter { descriptor in
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let result = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
            }
            return result == 0 && address.sin_family == sa_family_t(AF_INET) && UInt16(bigEndian: address.sin_port) == port
                && noDelay(descriptor) >= 0
        }
    }
}
