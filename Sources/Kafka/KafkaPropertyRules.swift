import CRdKafka
#if canImport(Glibc)
import Glibc
#endif

/// Which librdkafka properties a user may pass through, and a check of the rest by librdkafka.
///
/// The bridge sets the properties that carry its guarantees (contract §6) itself; passing one
/// through would silently weaken or break them, so it is refused by name, whatever its value.
public enum KafkaPropertyRules {
    /// Producer or consumer.
    public enum Role: Sendable {
        case consumer, producer
    }

    /// Whether a librdkafka property holds a secret, by its name (passwords, keys, tokens,
    /// SASL configurations): its value is never printed.
    public static func isSecret(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return ["password", "secret", "pem", "oauthbearer.config", "token", "jaas"].contains { lowered.contains($0) }
    }

    /// Properties the bridge sets for `role`, with why they cannot be passed through.
    public static func reserved(for role: Role) -> [String: String] {
        switch role {
        case .consumer:
            [
                "bootstrap.servers": "set by kafka.brokers",
                "metadata.broker.list": "set by kafka.brokers",
                "group.id": "set by kafka.group_id",
                "enable.auto.commit": "offsets are committed only after their records were processed",
                "auto.commit.enable": "offsets are committed only after their records were processed",
                "enable.auto.offset.store": "offsets are stored only after their records were processed",
                "partition.assignment.strategy": "rebalancing is cooperative-sticky (in-flight work is kept across rebalances)",
                "isolation.level": "only committed requests are read",
                "auto.offset.reset": "a new group starts at the earliest record, so no request is skipped",
                "enable.partition.eof": "the bridge reads partitions as endless streams",
                "offset.store.method": "offsets are committed to the consumer group, where every instance finds them",
            ]
        case .producer:
            [
                "bootstrap.servers": "set by kafka.brokers",
                "metadata.broker.list": "set by kafka.brokers",
                "enable.idempotence": "outputs are written once per send, in order (idempotent producer)",
                "acks": "outputs are acknowledged by every in-sync replica (acks=all)",
                "request.required.acks": "outputs are acknowledged by every in-sync replica (acks=all)",
                "transactional.id": "set by kafka.exactly_once",
                "delivery.report.only.error": "every delivery report completes an input offset",
            ]
        }
    }

    /// Why `name` cannot be passed through for `role`, or nil when it can. librdkafka hands a
    /// name it does not know for the client to the default topic configuration, which drops a
    /// leading `topic.`: `topic.auto.offset.reset` sets `auto.offset.reset`, and is refused
    /// with it.
    public static func reservation(of name: String, for role: Role) -> String? {
        let reserved = reserved(for: role)
        if let reason = reserved[name] { return reason }
        guard name.hasPrefix(topicPrefix) else { return nil }
        return reserved[String(name.dropFirst(topicPrefix.count))]
    }

    private static let topicPrefix = "topic."

    /// Refuses reserved properties, then sets every property on a throwaway librdkafka
    /// configuration, which checks names and values without connecting anywhere.
    /// - Throws: ``KafkaError`` naming the first offending property (never its value).
    public static func validate(_ properties: [String: String], for role: Role) throws(KafkaError) {
        for name in properties.keys.sorted() {
            if let reason = reservation(of: name, for: role) {
                throw KafkaError.configuration("Kafka \(role) property \"\(name)\" cannot be set: \(reason)")
            }
        }
        // invariant: rd_kafka_conf_new only returns NULL when out of memory.
        let conf = rd_kafka_conf_new()!
        defer { rd_kafka_conf_destroy(conf) }
        do {
            try RDKafkaClient.apply(properties.sorted(by: { $0.key < $1.key }).map { (name: $0.key, value: $0.value) }, to: conf)
        } catch let error as KafkaError {
            throw error
        } catch {
            throw KafkaError.configuration("\(error)")
        }
    }

    /// The properties a throwaway client (`checkSettings`) is created with: without `debug`,
    /// whose log lines are of no use there; nil when creating one could reach the network
    /// (`sasl.oauthbearer.method: oidc` fetches a token from its endpoint as soon as the client
    /// exists), where only the property-by-property check is made.
    static func checkableOffline(_ properties: [String: String]) -> [String: String]? {
        if properties["sasl.oauthbearer.method"]?.lowercased() == "oidc" { return nil }
        return properties.filter { $0.key != "debug" }
    }

    /// Added last to a throwaway client's properties: librdkafka's own log lines (no broker
    /// configured, ...) are of no use there.
    static let offlineCheckExtras: [(name: String, value: String)] = [("log_level", "0")]

    /// Whether librdkafka knows a property of this name (for consumers or producers), with or
    /// without a leading `topic.`: librdkafka's own list of properties
    /// (`rd_kafka_conf_properties_show`) names it, or a scratch configuration has a value for
    /// it. The value alone does not tell: librdkafka 2.0.2 answers "unknown" for a text property
    /// without a default (`ssl.ca.location`, `sasl.username`). Nothing connects.
    public static func isKnown(_ name: String) -> Bool {
        let known = documentedNames
        if known.contains(name) { return true }
        if name.hasPrefix(topicPrefix), known.contains(String(name.dropFirst(topicPrefix.count))) { return true }
        // invariant: rd_kafka_conf_new only returns NULL when out of memory.
        let conf = rd_kafka_conf_new()!
        defer { rd_kafka_conf_destroy(conf) }
        var size = 0
        return rd_kafka_conf_get(conf, name, nil, &size) != RD_KAFKA_CONF_UNKNOWN
    }

    /// The names of librdkafka's documented global and topic properties, read once.
    static let documentedNames: Set<String> = {
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        guard let stream = open_memstream(&buffer, &size) else { return [] }
        rd_kafka_conf_properties_show(stream)
        fclose(stream)
        guard let buffer else { return [] }
        defer { free(buffer) }
        return propertyNames(inTable: String(decoding: UnsafeRawBufferPointer(start: buffer, count: size), as: UTF8.self))
    }()

    /// The names in the first column of `rd_kafka_conf_properties_show`'s tables: rows of
    /// `name | C/P | range | default | importance | description`, under a header row and a rule.
    static func propertyNames(inTable text: String) -> Set<String> {
        var names: Set<String> = []
        for line in text.split(separator: "\n") {
            guard let bar = line.firstIndex(of: "|") else { continue }
            let cell = line[..<bar].drop { $0 == " " }
            let name = cell.prefix { $0 != " " }
            guard !name.isEmpty, name != "Property", !name.hasPrefix("-"), cell.dropFirst(name.count).allSatisfy({ $0 == " " }) else { continue }
            names.insert(String(name))
        }
        return names
    }
}
