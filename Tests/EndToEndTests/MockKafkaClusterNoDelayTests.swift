import BridgeLocal
import Glibc
import HTTP2
import Kafka
import Observability
import Testing

@Suite(.timeLimit(.minutes(1)))
struct MockKafkaClusterNoDelayTests {
    /// The mock brokers accept connections with Nagle's algorithm on (unlike Kafka's).
    /// `disableNagle` before any client connects turns it off on the connections accepted
    /// afterwards (they inherit it from the listening socket), and leaves the client's end of
    /// the connection, in this same process, as it was.
    @Test(arguments: [false, true])
    func connectionsAcceptedAfterwardsHaveNagleOff(disabled: Bool) throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        defer { cluster.close() }
        try cluster.createTopic("nodelay", partitions: 1)
        if disabled { #expect(!cluster.disableNagle().isEmpty) }  // the listening socket

        let producer = try KafkaProducer(
            bootstrapServers: cluster.bootstrapServers, properties: [:], logger: Logger(label: "test.producer"),
            deliveryHandler: { _, _ in })
        defer { producer.close() }
        try producer.produce(topic: "nodelay", key: nil, value: Array("x".utf8), headers: [], tag: 1)
        #expect(producer.flush(timeoutMilliseconds: 10_000))  // delivered: the broker accepted the connection

        let brokerPort = try #require(cluster.bootstrapServers.split(separator: ":").last.flatMap { Int($0) })
        let connected = (0..<1024).map(Int32.init).filter { Self.noDelay($0) >= 0 && Self.hasPeer($0) }
        let accepted = connected.filter { SocketAddress.localPort(of: $0) == brokerPort }
        let clients = connected.filter { Self.peerPort(of: $0) == brokerPort }
        #expect(!accepted.isEmpty)
        #expect(!clients.isEmpty)
        #expect(accepted.allSatisfy { Self.noDelay($0) == (disabled ? 1 : 0) })
        #expect(clients.allSatisfy { Self.noDelay($0) == 0 })  // librdkafka's default, untouched
    }

    /// `TCP_NODELAY` of a TCP socket; -1 for any other descriptor.
    static func noDelay(_ descriptor: Int32) -> Int32 {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length) == 0 else { return -1 }
        return value
    }

    static func hasPeer(_ descriptor: Int32) -> Bool { peerPort(of: descriptor) != nil }

    static func peerPort(of descriptor: Int32) -> Int? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        guard result == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
