import CRdKafka
import Observability
import Synchronization

/// librdkafka's built-in mock Kafka cluster, listening on 127.0.0.1, for tests, the demo and
/// the benchmark.
///
/// It supports producing (also idempotent and transactional), consumer groups and offset
/// commits. Its transactions are protocol only: in librdkafka 2.0.2 `TxnOffsetCommit` is
/// answered but its offsets are not committed, no transaction markers are written and aborted
/// records are served to `read_committed` readers, and a second producer with the same
/// `transactional.id` does not fence the first (see `KafkaTransactionTests`). In librdkafka 2.0.2 it keeps at most 5 MB or 100,000 records per partition and
/// drops the oldest beyond that.
public final class MockKafkaCluster: @unchecked Sendable {
    /// Kafka protocol ApiKeys for ``pushRequestErrors(apiKey:errors:)``.
    public enum APIKey {
        /// Produce.
        public static let produce: Int16 = 0
        /// Fetch.
        public static let fetch: Int16 = 1
        /// OffsetCommit.
        public static let offsetCommit: Int16 = 8
        /// OffsetFetch.
        public static let offsetFetch: Int16 = 9
        /// FindCoordinator.
        public static let findCoordinator: Int16 = 10
        /// JoinGroup.
        public static let joinGroup: Int16 = 11
        /// Heartbeat.
        public static let heartbeat: Int16 = 12
        /// SyncGroup.
        public static let syncGroup: Int16 = 14
        /// InitProducerId.
        public static let initProducerID: Int16 = 22
        /// AddPartitionsToTxn.
        public static let addPartitionsToTransaction: Int16 = 24
        /// EndTxn (commit or abort).
        public static let endTransaction: Int16 = 26
        /// TxnOffsetCommit.
        public static let transactionOffsetCommit: Int16 = 28
    }

    /// The handle librdkafka requires to own the cluster; it is otherwise unused.
    private let owner: RDKafkaClient
    private let cluster: OpaquePointer
    /// Set by `close`; calls check it under the lock so none runs on a destroyed cluster.
    private let isClosed = Locked(false)
    /// The `bootstrap.servers` value that reaches the mock brokers.
    public let bootstrapServers: String

    /// Starts a cluster of `brokers` brokers (ids 1...brokers).
    public init(brokers: Int = 1) throws {
        let context = RDKafkaClientContext(logger: Logger(label: "kafka.mock"))
        // No bootstrap.servers: this handle never connects. Only warnings and errors are logged.
        owner = try RDKafkaClient(kind: .producer, properties: [("log_level", "4")], context: context)
        guard let created = rd_kafka_mock_cluster_new(owner.pointer, Int32(clamping: brokers)) else {
            owner.destroy()
            throw KafkaError(code: KafkaError.Code.invalidArgument, message: "could not start the mock Kafka cluster")
        }
        cluster = created
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(created))
    }

    deinit {
        close()
    }

    /// Creates `name` with `partitions` partitions (replication factor 1).
    public func createTopic(_ name: String, partitions: Int32) throws {
        let result = try withCluster { rd_kafka_mock_topic_create($0, name, partitions, 1) }
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "create topic \(name)") }
    }

    /// Makes broker `broker` the leader of `topic`'s `partition`.
    public func setPartitionLeader(topic: String, partition: Int32, broker: Int32) throws {
        let result = try withCluster { rd_kafka_mock_partition_set_leader($0, topic, partition, broker) }
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "leader of \(topic)/\(partition)") }
    }

    /// Makes broker `broker` the coordinator of consumer group `groupID`.
    public func setGroupCoordinator(groupID: String, broker: Int32) throws {
        let result = try withCluster { rd_kafka_mock_coordinator_set($0, "group", groupID, broker) }
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "coordinator of \(groupID)") }
    }

    /// Makes broker `broker` the transaction coordinator of `transactionalID`.
    public func setTransactionCoordinator(transactionalID: String, broker: Int32) throws {
        let result = try withCluster { rd_kafka_mock_coordinator_set($0, "transaction", transactionalID, broker) }
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "coordinator of \(transactionalID)") }
    }

    /// Disconnects broker `id` and refuses new connections (leadership does not move).
    public func setBrokerDown(_ id: Int32) {
        _ = try? withCluster { rd_kafka_mock_broker_set_down($0, id) }
    }

    /// Lets broker `id` accept connections again.
    public func setBrokerUp(_ id: Int32) {
        _ = try? withCluster { rd_kafka_mock_broker_set_up($0, id) }
    }

    /// Makes the next `errors.count` requests with `apiKey` fail with these error codes, in
    /// order (``KafkaError/Code`` has common ones).
    public func pushRequestErrors(apiKey: Int16, errors: [Int32]) {
        let codes = errors.map { rd_kafka_resp_err_t(rawValue: $0) }
        codes.withUnsafeBufferPointer { buffer in
            _ = try? withCluster { rd_kafka_mock_push_request_errors_array($0, apiKey, buffer.count, buffer.baseAddress) }
        }
    }

    /// Makes the next `errors.count` requests with `apiKey` that broker `id` receives fail with
    /// these error codes, in order, each answered `rttMilliseconds` late; other brokers answer
    /// normally.
    public func pushBrokerRequestErrors(broker id: Int32, apiKey: Int16, errors: [Int32], rttMilliseconds: Int32 = 0) {
        for error in errors {
            _ = try? withCluster {
                apnsb_rd_kafka_mock_broker_push_request_error($0, id, apiKey, rd_kafka_resp_err_t(rawValue: error), rttMilliseconds)
            }
        }
    }

    /// How many errors pushed with ``pushBrokerRequestErrors(broker:apiKey:errors:rttMilliseconds:)`` broker `id`
    /// has not answered with yet (nil when the cluster is closed or does not know the broker):
    /// a test reads 0 to know its requests met every injected error.
    public func pendingRequestErrors(broker id: Int32, apiKey: Int16) -> Int? {
        var count = 0
        let result = try? withCluster { rd_kafka_mock_broker_error_stack_cnt($0, id, apiKey, &count) }
        return result == RD_KAFKA_RESP_ERR_NO_ERROR ? count : nil
    }

    /// Stops the brokers. Idempotent; clients still connected see their connections fail.
    public func close() {
        let wasOpen = isClosed.withLock { isClosed -> Bool in
            defer { isClosed = true }
            return !isClosed
        }
        guard wasOpen else { return }
        rd_kafka_mock_cluster_destroy(cluster)
        owner.destroy()
    }

    private func withCluster<R>(_ body: (OpaquePointer) -> R) throws -> R {
        try isClosed.withLock { isClosed in
            guard !isClosed else { throw KafkaError.closed("mock Kafka cluster") }
            return body(cluster)
        }
    }
}
