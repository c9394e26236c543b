import Bridge
import Foundation
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
        // librdkafka refuses a subscription naming a topic twice.
        let twice = try #require(parseError("  brokers: b\n  topics: [apns.requests, other, apns.requests]"))
        #expect(twice.keyPath == "kafka.topics[2]")
        #expect(twice.message == "the topic \"apns.requests\" is already listed")
        let longest = String(repeating: "t", count: 249)
        #expect(parseError("  brokers: b\n  topics: [\(longest)]\n  results_topic: a.b_c-9") == nil)
    }

    /// The group id and app names go into the one-line reasons `/readyz` answers with, logs and
    /// metric labels: a line break or another control character in one is refused, naming the key.
    @Test func namesWithControlCharactersAreRefused() throws {
        let groupID = try #require(parseError("  brokers: b\n  group_id: \"bridge\\nHTTP/1.1 200 OK\""))
        #expect(groupID.keyPath == "kafka.group_id")
        #expect(groupID.message.contains("control characters"), "\(groupID.message)")
        for name in ["\"chat\\r\"", "\"a\\tb\"", "\"x\\u007F\"", "\"x\\u2028y\"", "\"x\\u0085\""] {
            let yaml = "kafka: {brokers: b}\napps:\n  - {name: \(name), bundle_id: com.x, auth: {type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM123456}}\n"
            let appName = try #require(parseError(yaml: yaml), "\(name)")
            #expect(appName.keyPath == "apps[0].name")
        }
        // Spaces and letters beyond ASCII are names like any other.
        #expect(parseError("  brokers: b\n  group_id: \"bridge group é\"") == nil)
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

    /// A key given where its file's path belongs (`key_file: "${APNS_KEY}"` with the key itself in
    /// the variable) is refused without being repeated, in every path key and in the identifiers.
    @Test func keyMaterialWhereAPathBelongsIsRefusedWithoutBeingShown() throws {
        let body = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgSECRETSECRET"
        let pem = "-----BEGIN PRIVATE KEY-----\n\(body)\n-----END PRIVATE KEY-----\n"
        let cases: [(auth: String, keyPath: String)] = [
            ("{type: token, key_file: \"${KEY}\", key_id: ABC123DEFG, team_id: TEAM123456}", "apps[0].auth.key_file"),
            ("{type: certificate, cert_file: \"${KEY}\", key_file: k.pem}", "apps[0].auth.cert_file"),
            ("{type: certificate, cert_file: c.pem, key_file: \"${KEY}\"}", "apps[0].auth.key_file"),
            ("{type: certificate, p12_file: \"${KEY}\"}", "apps[0].auth.p12_file"),
            ("{type: token, key_file: k.p8, key_id: \"${KEY}\", team_id: TEAM123456}", "apps[0].auth.key_id"),
        ]
        for (auth, keyPath) in cases {
            let yaml = "kafka: {brokers: b}\napps:\n  - name: chat\n    bundle_id: com.example.chat\n    auth: \(auth)"
            // Also the key's file encoded on one line (`base64 -w0`), a common way to hold it in a variable.
            let oneLine = Data(pem.utf8).base64EncodedString()
            for value in [pem, body + "\n" + body, "-----BEGIN PRIVATE KEY-----", oneLine, body + body] {
                do {
                    _ = try BridgeConfiguration.parse(yaml: yaml, environment: ["KEY": value])
                    Issue.record("\(keyPath): accepted")
                } catch {
                    #expect(error.keyPath == keyPath)
                    #expect(!error.description.contains("SECRET") && !error.description.contains("BEGIN")
                            && !error.description.contains(String(oneLine.prefix(20))), "\(error.description)")
                }
            }
        }
        let caFile = "kafka: {brokers: b}\napns: {ca_file: \"${KEY}\"}\n" + Self.apps
        do {
            _ = try BridgeConfiguration.parse(yaml: caFile, environment: ["KEY": pem])
            Issue.record("apns.ca_file: accepted")
        } catch {
            #expect(error.keyPath == "apns.ca_file")
            #expect(!error.description.contains("SECRET"), "\(error.description)")
        }
        // A path is still a path, spaces and all.
        let spaced = "kafka: {brokers: b}\napps:\n  - name: chat\n    bundle_id: com.example.chat\n"
            + "    auth: {type: token, key_file: \"/run/secrets/apns key.p8\", key_id: ABC123DEFG, team_id: TEAM123456}"
        #expect(parseError(yaml: spaced) == nil)
    }

    /// A secret written without the colon after its name (`passphrase hunter2`) is part of a
    /// key, or of the value before it: the error names the place without the text that follows.
    @Test func aSecretWithoutItsColonIsNotEchoed() throws {
        // In an app's `auth` an unknown key without a value, or on the line of an unquoted
        // passphrase after it, is not shown at all (a comma makes the secret, or what follows the
        // comma in it, a key of its own, with or without a value, even one that looks like a
        // misspelt key); the section and the line are.
        for entry in ["passphrase hunter2", "passphrase=hunter2", "passphrase\thunter2", "passphrase\u{A0}hunter2", "passphrase,hunter2",
                      "passphrase: hun,hunter2", "passphrase: hun,hunter2: 2", "passphrase: hun, hunter2: x, hunter3: y",
                      "passphrase: hunter,types: 2"] {
            let flow = "kafka: {brokers: b}\napps:\n  - {name: a, bundle_id: b.c, auth: {type: certificate, p12_file: /x.p12, \(entry)}}\n"
            let error = try #require(parseError(yaml: flow), "\(entry)")
            #expect(error.keyPath == "apps[0].auth", "\(error)")
            #expect(error.line == 3)
            #expect(!"\(error)".contains("hunter2"), "\(error)")
        }
        // A key with a value on a line of its own, or beside a quoted passphrase, is named.
        let named = [
            "  - name: a\n    bundle_id: b.c\n    auth:\n      type: certificate\n      p12_file: /x.p12\n      passphrase: hunter2\n      colour: blue\n",
            "  - {name: a, bundle_id: b.c, auth: {type: certificate, p12_file: /x.p12, passphrase: \"hun,ter\", colour: blue}}\n",
        ]
        for apps in named {
            let error = try #require(parseError(yaml: "kafka: {brokers: b}\napps:\n" + apps))
            #expect(error.keyPath == "apps[0].auth.colour", "\(error)")
            #expect(!"\(error)".contains("hun"), "\(error)")
        }
        // Elsewhere a key is shown up to its first character no key has.
        for entry in ["sasl.password SuperKafkaSecret", "sasl.password\u{A0}SuperKafkaSecret", "sasl.password=SuperKafkaSecret"] {
            let kafka = try #require(parseError("  brokers: b\n  producer: {\(entry)}"), "\(entry)")
            #expect(kafka.keyPath == "kafka.producer.sasl.password…")
            #expect(!"\(kafka)".contains("SuperKafkaSecret"), "\(kafka)")
        }
        let general = try #require(parseError("  brokers: b\n  group_id hunter2: x"))
        #expect(general.keyPath == "kafka.group_id…")
        // In block style, indented further, the line reads as the end of the value above it;
        // at the same indentation it is a YAML error that does not quote it either.
        for indent in ["    ", ""] {
            let block = """
            kafka: {brokers: b}
            apps:
              - name: legacy
                bundle_id: com.example.legacy
                auth:
                  type: certificate
                  p12_file: /x.p12
                  \(indent)passphrase hunter2
            """
            let error = try #require(parseError(yaml: block))
            #expect(!"\(error)".contains("hunter2"), "\(error)")
            if !indent.isEmpty { #expect(error.message.contains("colon missing"), "\(error)") }
        }
    }

    /// librdkafka hands a name it does not know for the client to the topic configuration,
    /// without a leading `topic.`: `topic.auto.offset.reset` would set `auto.offset.reset`.
    @Test func aReservedPropertyBehindTheTopicPrefixIsRefused() throws {
        let consumer = try #require(parseError("  brokers: b\n  consumer: {topic.auto.offset.reset: latest}"))
        #expect(consumer.keyPath == "kafka.consumer.topic.auto.offset.reset")
        let producer = try #require(parseError("  brokers: b\n  producer: {topic.acks: \"1\"}"))
        #expect(producer.keyPath == "kafka.producer.topic.acks")
        let fileStore = try #require(parseError("  brokers: b\n  consumer: {offset.store.method: file}"))
        #expect(fileStore.keyPath == "kafka.consumer.offset.store.method")
        // A client-wide property that starts with `topic.` is not reserved.
        #expect(parseError("  brokers: b\n  consumer: {topic.metadata.refresh.interval.ms: \"60000\"}") == nil)
    }

    /// Settings librdkafka accepts one by one but refuses together, and a consumer that would
    /// never commit on its own, are refused before any client connects (`check` and `run`),
    /// naming the section.
    @Test func settingsRefusedOnlyTogetherAreFoundWithoutABroker() throws {
        func checkError(_ kafka: String) throws -> ConfigurationError? {
            let configuration = try BridgeConfiguration.parse(yaml: "kafka:\n  brokers: 127.0.0.1:9\n" + kafka + "\n" + Self.apps, environment: [:])
            do {
                try ConfigurationCheck.validateKafkaProperties(configuration)
                return nil
            } catch {
                return error
            }
        }
        let cases: [(kafka: String, keyPath: String, names: String)] = [
            ("  producer: {max.in.flight.requests.per.connection: \"100\"}", "kafka.producer", "max.in.flight"),
            ("  producer: {retries: \"0\"}", "kafka.producer", "retries"),
            ("  consumer: {max.poll.interval.ms: \"1000\"}", "kafka.consumer", "max.poll.interval.ms"),
            ("  consumer: {auto.commit.interval.ms: \"00\"}", "kafka.consumer", "auto.commit.interval.ms"),
            // The consumer-lag gauge of /metrics comes from librdkafka's statistics.
            ("  consumer: {statistics.interval.ms: \" 0\"}", "kafka.consumer.statistics.interval.ms", "apns_bridge_consumer_lag"),
            ("  exactly_once: true\n  producer: {message.timeout.ms: \"120000\", transaction.timeout.ms: \"60000\"}",
             "kafka.producer", "transaction.timeout.ms"),
        ]
        for (kafka, keyPath, name) in cases {
            let error = try #require(try checkError(kafka), "\(kafka)")
            #expect(error.keyPath == keyPath)
            #expect(error.message.contains(name), "\(error.message)")
        }
        // Exactly once, offsets are committed with the transactions: no periodic commit is needed.
        #expect(try checkError("  exactly_once: true\n  consumer: {auto.commit.interval.ms: \"0\"}") == nil)
        #expect(try checkError("  producer: {max.in.flight.requests.per.connection: \"5\"}\n  consumer: {auto.commit.interval.ms: \"1000\"}") == nil)
        #expect(try checkError("  consumer: {statistics.interval.ms: \"60000\"}") == nil)
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
