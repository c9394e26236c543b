import Bridge
import Testing

/// Configurations an operator can write by mistake that would start a bridge that never works,
/// loops on its own output or shows a secret: each is refused, naming the key.
@Suite struct ConfigurationRefusalTests {
    static let apps = """
    apps:
      - name: chat
        bundle_id: com.example.chat
        auth: {type: token, key_file: key.p8, key_id: ABC123DEFG, team_id: TEAM123456}
    """

    /// The error of a configuration with this `kafka:` section's body and one app.
    func parseError(_ kafka: String) -> ConfigurationError? {
        parseError(yaml: "kafka:\n" + kafka + "\n" + Self.apps)
    }

    func parseError(yaml: String) -> ConfigurationError? {
        do {
            _ = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
            return nil
        } catch {
            return error
        }
    }

    @Test func anEmptyBrokerListIsRefused() throws {
        let error = try #require(parseError("  brokers: []"))
        #expect(error.keyPath == "kafka.brokers")
        #expect(error.message == "at least one broker is required")
    }

    /// Every dead letter read back would be an unusable request making another dead letter.
    @Test func aRequestTopicThatIsAlsoAnOutputIsRefused() throws {
        let deadLetters = try #require(parseError("  brokers: b\n  topics: [apns.requests, apns.dead-letters]"))
        #expect(deadLetters.keyPath == "kafka.topics[1]")
        #expect(deadLetters.message.contains("kafka.dead_letter_topic"))
        let results = try #require(parseError("  brokers: b\n  topics: [in]\n  results_topic: in"))
        #expect(results.keyPath == "kafka.topics[0]")
        #expect(results.message.contains("kafka.results_topic"))
        // With the default request topic, the output key is named.
        let invalidTokens = try #require(parseError("  brokers: b\n  invalid_tokens_topic: apns.requests"))
        #expect(invalidTokens.keyPath == "kafka.invalid_tokens_topic")
        // Distinct names are fine, and outputs may share a topic among themselves.
        #expect(parseError("  brokers: b\n  topics: [in]\n  results_topic: out\n  invalid_tokens_topic: out") == nil)
    }

    /// librdkafka takes a name starting with `^` as a pattern, which matches the outputs too.
    @Test func topicPatternsAndIllegalNamesAreRefused() throws {
        let pattern = try #require(parseError("  brokers: b\n  topics: [\"^apns\\\\..*\"]"))
        #expect(pattern.keyPath == "kafka.topics[0]")
        #expect(pattern.message.contains("no patterns"))
        for (key, bad) in [("topics", "has space"), ("results_topic", "ü"), ("dead_letter_topic", ".."),
                           ("invalid_tokens_topic", String(repeating: "t", count: 250))] {
            let error = try #require(parseError("  brokers: b\n  \(key): \"\(bad)\""), "\(key)")
            #expect(error.keyPath == "kafka.\(key)")  // a single name stands for a list of one
        }
        let longest = String(repeating: "t", count: 249)
        #expect(parseError("  brokers: b\n  topics: [\(longest)]\n  results_topic: a.b_c-9") == nil)
    }

    /// A mistyped `${…}` inside a secret shows neither the text between the braces (part of the
    /// secret) nor the secret around it.
    @Test func aBrokenReferenceInASecretIsNotEchoed() throws {
        let passphrase = """
        kafka: {brokers: b}
        apps:
          - name: legacy
            bundle_id: com.example.legacy
            auth: {type: certificate, cert_file: c.pem, key_file: k.pem, passphrase: "Tr0ub4dor${x y}&3"}
        """
        let passphraseError = try #require(parseError(yaml: passphrase))
        #expect(passphraseError.keyPath == "apps[0].auth.passphrase")
        for fragment in ["Tr0ub4dor", "x y", "&3"] { #expect(!passphraseError.description.contains(fragment)) }

        let saslPassword = try #require(parseError("  brokers: b\n  producer: {sasl.password: \"pa${SECRETPART}ss\"}"))
        #expect(saslPassword.keyPath == "kafka.producer.sasl.password")
        #expect(!saslPassword.description.contains("SECRETPART"))
        let saslWrongType = try #require(parseError("  brokers: b\n  consumer: {sasl.password: [hunter2]}"))
        #expect(!saslWrongType.description.contains("hunter2"))
        // Outside secrets the variable is named, which is what an operator needs to fix it.
        let plain = try #require(parseError("  brokers: ${BROKERS}"))
        #expect(plain.message == "environment variable BROKERS is not set")
    }

    /// Left at its default, `max_backoff` follows a longer `initial_backoff`, and the effective
    /// configuration `check` prints parses back to the same configuration.
    @Test func aLongInitialBackoffRaisesTheDefaultMaximum() throws {
        let yaml = "kafka: {brokers: b}\napns: {retry: {initial_backoff: 1m}}\n" + Self.apps
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
        #expect(configuration.apns.retry.initialBackoff == .seconds(60))
        #expect(configuration.apns.retry.maxBackoff == .seconds(60))
        let reparsed = try BridgeConfiguration.parse(yaml: configuration.effectiveYAML(), environment: [:])
        #expect(reparsed.apns.retry == configuration.apns.retry)
        // A maximum given shorter than the initial backoff is still an error.
        let error = try #require(parseError(yaml: "kafka: {brokers: b}\napns: {retry: {initial_backoff: 1m, max_backoff: 30s}}\n" + Self.apps))
        #expect(error.keyPath == "apns.retry.max_backoff")
    }
}
