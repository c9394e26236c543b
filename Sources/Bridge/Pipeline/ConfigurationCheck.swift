import Kafka

/// Checks that go beyond parsing: every app's credentials can be loaded, and librdkafka accepts
/// every property passed through.
public enum ConfigurationCheck {
    /// Loads every app's key or certificate files and TLS settings.
    /// - Throws: `PipelineError` naming the app (`apps.<name>.auth`) and the problem.
    public static func loadCredentials(_ configuration: BridgeConfiguration) throws(PipelineError) {
        for app in configuration.apps {
            _ = try AppCredentials(app: app, caFile: configuration.apns.caFile)
        }
    }

    /// Sets every `kafka.consumer` / `kafka.producer` property on a throwaway librdkafka
    /// configuration (no connection is made), so a misspelt name or a bad value is found by
    /// `check`, not at start.
    /// - Throws: `ConfigurationError` naming the key (`kafka.producer.linger.ms`), never its value.
    public static func validateKafkaProperties(_ configuration: BridgeConfiguration) throws(ConfigurationError) {
        let sections: [(KafkaPropertyRules.Role, String, [String: String])] = [
            (.consumer, "kafka.consumer", configuration.kafka.consumer),
            (.producer, "kafka.producer", configuration.kafka.producer),
        ]
        for (role, keyPath, properties) in sections {
            // One at a time, so the error names the key librdkafka refused.
            for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
                do {
                    try KafkaPropertyRules.validate([name: value], for: role)
                } catch {
                    throw ConfigurationError(keyPath: "\(keyPath).\(name)", message: error.message)
                }
            }
        }
    }
}
