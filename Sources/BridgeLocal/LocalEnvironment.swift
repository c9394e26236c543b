import Bridge
import APNs
import APNsSimulator
import Kafka

/// Everything the bridge talks to, running on this machine: librdkafka's mock Kafka cluster with
/// the bridge's topics, and the APNs simulator with generated credentials on 127.0.0.1.
///
/// Used by `apns-bridge demo`, the end-to-end tests and the benchmark. `close()` stops both and
/// removes the generated files.
public final class LocalEnvironment: @unchecked Sendable {
    /// The mock Kafka cluster.
    public let kafka: MockKafkaCluster
    /// The APNs simulator.
    public let simulator: APNsSimulator
    /// Generated CA, server certificate and auth key.
    public let credentials: TestCredentials
    /// Topic names the configuration uses.
    public let requestTopic = "apns.requests"
    public let resultsTopic = "apns.results"
    public let invalidTokensTopic = "apns.invalid-tokens"
    public let deadLetterTopic = "apns.dead-letters"
    /// Partitions of the request topic.
    public let partitions: Int32
    private let ownsDirectory: String

    /// Starts the mock cluster and the simulator.
    /// - Parameters:
    ///   - partitions: partitions of every topic.
    ///   - unregisteredTokens: tokens the simulator answers 410 Unregistered for (token → ms timestamp).
    ///   - tokenApps: tokens the simulator knows the app of (token → bundle id): pushed to another
    ///     app's topic, they are answered 400 DeviceTokenNotForTopic.
    ///   - maxConcurrentStreams: the simulator's SETTINGS_MAX_CONCURRENT_STREAMS.
    ///   - brokers: brokers of the mock cluster (ids 1...brokers).
    ///   - simulatorLatency: how long the simulator waits before each answer (APNs' round trip).
    public init(partitions: Int32 = 4, unregisteredTokens: [String: Int64] = [:], tokenApps: [String: String] = [:],
                maxConcurrentStreams: Int = 1000, simulatorThreads: Int = 1, brokers: Int = 1,
                simulatorLatency: Duration = .zero) throws {
        let directory = try LocalFiles.makeTemporaryDirectory(prefix: "apns-bridge")
        ownsDirectory = directory
        do {
            credentials = try TestCredentials.generate(in: directory)
            self.partitions = partitions
            kafka = try MockKafkaCluster(brokers: brokers)
            for topic in [requestTopic, resultsTopic, invalidTokensTopic, deadLetterTopic] {
                try kafka.createTopic(topic, partitions: partitions)
            }
            var simulatorConfiguration = credentials.simulatorConfiguration()
            simulatorConfiguration.unregisteredTokens = unregisteredTokens
            simulatorConfiguration.tokenApps = tokenApps
            simulatorConfiguration.maxConcurrentStreams = maxConcurrentStreams
            simulatorConfiguration.threads = simulatorThreads
            simulatorConfiguration.faults.latency = simulatorLatency
            simulator = try APNsSimulator(configuration: simulatorConfiguration)
            try simulator.start()
        } catch {
            LocalFiles.removeDirectory(directory)
            throw error
        }
    }

    /// A complete bridge configuration (contract §8) for this environment. `extra` is appended
    /// verbatim at the top level (e.g. `limits:` or `log:` sections); `producer` and `consumer` add
    /// librdkafka producer and consumer properties. `http.listen` takes an ephemeral port, so that bridges of concurrent
    /// runs never compete for 9464.
    /// `apns` adds lines to the `apns:` section (e.g. `retry: {...}`). `lingerMilliseconds` is the
    /// producer's `linger.ms` (2 for quick tests and demos; nil: the bridge's own default, as users run it).
    public func configurationYAML(groupID: String = "apns-bridge", connections: Int = 2, exactlyOnce: Bool = false,
                                  extra: String = "", producer: [String: String] = [:],
                                  consumer: [String: String] = [:], apns: String = "",
                                  lingerMilliseconds: Int? = 2) -> String {
        var producer = producer
        if let lingerMilliseconds { producer["linger.ms"] = "\(lingerMilliseconds)" }
        let producerSection = producer.isEmpty ? "" : "\n  producer:" + producer.sorted(by: { $0.key < $1.key })
            .map { "\n    \($0.key): \($0.value)" }.joined()
        let consumerLines = consumer.sorted(by: { $0.key < $1.key }).map { "\n    \($0.key): \($0.value)" }.joined()
        return """
        kafka:
          brokers: \(kafka.bootstrapServers)
          group_id: \(groupID)
          topics: [\(requestTopic)]
          results_topic: \(resultsTopic)
          invalid_tokens_topic: \(invalidTokensTopic)
          dead_letter_topic: \(deadLetterTopic)
          exactly_once: \(exactlyOnce)
          consumer:
            session.timeout.ms: 6000
            heartbeat.interval.ms: 500
            auto.commit.interval.ms: 200\(consumerLines)\(producerSection)
        apns:
          production_url: https://127.0.0.1:\(simulator.port)
          sandbox_url: https://127.0.0.1:\(simulator.port)
          ca_file: \(credentials.caFile)
          request_timeout: 10s
          \(apns)
        apps:
          - name: demo
            bundle_id: com.example.demo
            environment: production
            connections: \(connections)
            auth: {type: token, key_file: \(credentials.authKeyFile), key_id: \(credentials.keyID), team_id: \(credentials.teamID)}
        http:
          listen: 127.0.0.1:0
        shutdown_timeout: 10s
        \(extra)
        """
    }

    /// The parsed configuration of `configurationYAML`.
    public func configuration(
        groupID: String = "apns-bridge", connections: Int = 2, exactlyOnce: Bool = false, extra: String = "",
        apns: String = ""
    ) throws -> BridgeConfiguration {
        try BridgeConfiguration.parse(
            yaml: configurationYAML(groupID: groupID, connections: connections, exactlyOnce: exactlyOnce, extra: extra,
                                    apns: apns),
            environment: [:])
    }

    /// Stops the simulator and the cluster and removes the generated files.
    public func close() {
        simulator.close()
        kafka.close()
        LocalFiles.removeDirectory(ownsDirectory)
    }
}
