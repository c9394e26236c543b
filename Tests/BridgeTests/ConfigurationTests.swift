import APNs
import Foundation
import Bridge
import Observability
import Testing

@Suite struct ConfigurationTests {
    /// A complete, documented configuration: every key of contract §8.
    static let fullExample = """
    # apns-bridge configuration (contract §8). ${VAR} and ${VAR:-default} read the environment.
    kafka:
      brokers: ${KAFKA_BROKERS:-localhost:9092}   # bootstrap.servers (required)
      group_id: apns-bridge                       # consumer group shared by all instances
      topics: [apns.requests, apns.requests.bulk] # request topics
      results_topic: apns.results
      invalid_tokens_topic: apns.invalid-tokens
      dead_letter_topic: apns.dead-letters
      exactly_once: false                         # true: transactional producer
      consumer:                                   # extra librdkafka consumer properties
        fetch.min.bytes: 1
        session.timeout.ms: 45000
        check.crcs: true
      producer:
        linger.ms: 5
        compression.type: lz4
    apns:
      production_url: https://api.push.apple.com:443
      sandbox_url: https://api.sandbox.push.apple.com:443
      ca_file: null          # extra CA bundle (a simulator's)
      request_timeout: 10s
      ping_interval: 60s
      ping_timeout: 7s
      retry: {max_attempts: 5, initial_backoff: 100ms, max_backoff: 30s}
    apps:
      - name: chat
        bundle_id: com.example.chat
        environment: production
        connections: 2
        auth: {type: token, key_file: /run/secrets/AuthKey_ABC123DEFG.p8, key_id: ABC123DEFG, team_id: TEAM123456}
      - name: legacy
        bundle_id: com.example.legacy
        environment: sandbox
        auth: {type: certificate, cert_file: cert.pem, key_file: key.pem, passphrase: "${LEGACY_PASS}"}
      - name: kiosk
        bundle_id: com.example.kiosk
        auth: {type: certificate, p12_file: cert.p12, passphrase: "${KIOSK_PASS:-}"}
    limits:
      max_in_flight: 20000
      max_tokens_per_request: 10000
    http:
      listen: 127.0.0.1:9464    # /metrics, /healthz, /readyz
    log:
      level: info               # trace, debug, info, warning, error
      format: json              # json or text
    shutdown_timeout: 30s       # drain time on SIGTERM/SIGINT
    """

    static let minimal = """
    kafka:
      brokers: k1:9092
    apps:
      - name: chat
        bundle_id: com.example.chat
        auth: {type: token, key_file: key.p8, key_id: ABC123DEFG, team_id: TEAM123456}
    """

    func parseError(_ yaml: String, environment: [String: String] = [:]) -> ConfigurationError? {
        do {
            _ = try BridgeConfiguration.parse(yaml: yaml, environment: environment)
            return nil
        } catch {
            return error
        }
    }

    @Test func fullExampleParses() throws {
        let configuration = try BridgeConfiguration.parse(yaml: Self.fullExample, environment: ["LEGACY_PASS": "s3cret"])
        #expect(configuration.kafka.brokers == "localhost:9092")
        #expect(configuration.kafka.topics == ["apns.requests", "apns.requests.bulk"])
        #expect(configuration.kafka.consumer == ["fetch.min.bytes": "1", "session.timeout.ms": "45000", "check.crcs": "true"])
        #expect(configuration.kafka.producer == ["linger.ms": "5", "compression.type": "lz4"])
        #expect(configuration.apns.productionURL == APNsEndpoint(host: "api.push.apple.com", port: 443))
        #expect(configuration.apns.sandboxURL.host == "api.sandbox.push.apple.com")
        #expect(configuration.apns.caFile == nil)
        #expect(configuration.apns.pingInterval == .seconds(60))
        #expect(configuration.apns.pingTimeout == .seconds(7))
        #expect(configuration.apns.retry == RetrySettings(maxAttempts: 5, initialBackoff: .milliseconds(100), maxBackoff: .seconds(30)))
        #expect(configuration.apps.count == 3)
        #expect(configuration.apps[0] == AppSettings(name: "chat", bundleID: "com.example.chat", environment: .production,
                                                      connections: 2,
                                                      auth: .token(keyFile: "/run/secrets/AuthKey_ABC123DEFG.p8",
                                                                   keyID: "ABC123DEFG", teamID: "TEAM123456")))
        #expect(configuration.apps[1].environment == .sandbox)
        #expect(configuration.apps[1].auth == .certificate(certFile: "cert.pem", keyFile: "key.pem", passphrase: "s3cret"))
        #expect(configuration.apps[2].auth == .certificatePKCS12(p12File: "cert.p12", passphrase: nil))
        #expect(configuration.apps[2].connections == 1)
        #expect(configuration.http == HTTPSettings(host: "127.0.0.1", port: 9464))
        #expect(configuration.log == LogSettings(level: .info, format: .json))
        #expect(configuration.shutdownTimeout == .seconds(30))
    }

    @Test func defaultsFillEveryOptionalKey() throws {
        let configuration = try BridgeConfiguration.parse(yaml: Self.minimal, environment: [:])
        #expect(configuration.kafka == KafkaSettings(brokers: "k1:9092"))
        #expect(configuration.kafka.groupID == "apns-bridge")
        #expect(configuration.kafka.topics == ["apns.requests"])
        #expect(configuration.kafka.resultsTopic == "apns.results")
        #expect(configuration.kafka.invalidTokensTopic == "apns.invalid-tokens")
        #expect(configuration.kafka.deadLetterTopic == "apns.dead-letters")
        #expect(configuration.kafka.exactlyOnce == false)
        #expect(configuration.apns == APNsSettings())
        #expect(configuration.apns.productionURL.description == "https://api.push.apple.com:443")
        #expect(configuration.apns.requestTimeout == .seconds(10))
        #expect(configuration.apns.pingInterval == .seconds(60))
        #expect(configuration.apns.pingTimeout == .seconds(10))
        #expect(configuration.apns.retry.maxAttempts == 5)
        #expect(configuration.apns.retry.initialBackoff == .milliseconds(100))
        #expect(configuration.apns.retry.maxBackoff == .seconds(30))
        #expect(configuration.limits == LimitsSettings(maxInFlight: 20000, maxTokensPerRequest: 10000))
        #expect(configuration.http == HTTPSettings(host: "127.0.0.1", port: 9464))
        #expect(configuration.log == LogSettings(level: .info, format: .json))
        #expect(configuration.shutdownTimeout == .seconds(30))
        #expect(configuration.apps[0].environment == .production)
        #expect(configuration.apps[0].connections == 1)
    }

    @Test func environmentExpansion() throws {
        let yaml = """
        kafka:
          brokers: "${BROKERS}"
          group_id: pre-${GROUP:-fallback}-post
          exactly_once: ${EOS:-false}
        apps:
          - name: chat
            bundle_id: ${BUNDLE:-com.example.chat}
            connections: ${CONNS:-3}
            auth: {type: token, key_file: key.p8, key_id: ABC123DEFG, team_id: TEAM123456}
        limits:
          max_in_flight: ${MAX:-50}
        shutdown_timeout: ${DRAIN:-5m}
        """
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: ["BROKERS": "b:1", "EOS": "false", "GROUP": ""])
        #expect(configuration.kafka.brokers == "b:1")
        #expect(configuration.kafka.groupID == "pre-fallback-post")
        #expect(configuration.kafka.exactlyOnce == false)
        #expect(configuration.apps[0].bundleID == "com.example.chat")
        #expect(configuration.apps[0].connections == 3)
        #expect(configuration.limits.maxInFlight == 50)
        #expect(configuration.shutdownTimeout == .seconds(300))

        let overridden = try BridgeConfiguration.parse(yaml: yaml, environment: ["BROKERS": "b:1", "GROUP": "g", "MAX": "7"])
        #expect(overridden.kafka.groupID == "pre-g-post")
        #expect(overridden.limits.maxInFlight == 7)

        let missing = try #require(parseError(yaml, environment: [:]))
        #expect(missing.keyPath == "kafka.brokers")
        #expect(missing.message.contains("BROKERS"))

        // A nested reference in a default is refused, set or not, never taken up to its first `}`.
        let nested = "kafka: {brokers: \"${A:-${B}}\"}\napps: [{name: c, bundle_id: b, auth: {type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM123456}}]"
        for environment in [[:], ["A": "xx"], ["B": "b:1"]] {
            let error = try #require(parseError(nested, environment: environment), "\(environment)")
            #expect(error.keyPath == "kafka.brokers")
            #expect(error.message.contains("nested ${…}"), "\(error.message)")
        }
    }

    /// In `[ ]` and `{ }` YAML reads a reference's braces as the collection's: unquoted, it is a
    /// syntax error that says to quote it; quoted, it works.
    @Test func referencesInFlowCollectionsNeedQuotesAndTheErrorSaysSo() throws {
        let app = "apps: [{name: c, bundle_id: b, auth: {type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM123456}}]"
        for line in ["  topics: [${TOPIC:-apns.requests}]", "  consumer: {sasl.password: ${KAFKA_PASSWORD}}"] {
            let error = try #require(parseError("kafka:\n  brokers: b:1\n\(line)\n\(app)", environment: ["KAFKA_PASSWORD": "pw"]))
            #expect(error.message.hasPrefix("invalid YAML: line 3"), "\(error.message)")
            #expect(error.message.contains("inside [ ] or { } a ${VAR} reference must be quoted"), "\(error.message)")
        }
        let quoted = try BridgeConfiguration.parse(
            yaml: "kafka:\n  brokers: b:1\n  topics: [\"${TOPIC:-apns.requests}\"]\n\(app)", environment: [:])
        #expect(quoted.kafka.topics == ["apns.requests"])
        // Another syntax error gets no such hint.
        #expect(parseError("kafka: [b:1\n\(app)")?.message.contains("${VAR}") == false)
    }

    /// What a value or key brings along (an escape sequence, a line break, a bidirectional
    /// override) is escaped in the error, so printing it cannot forge lines or recolour a terminal.
    @Test func controlCharactersInValuesAndKeysAreEscapedInErrors() throws {
        let value = try #require(parseError(Self.minimal + "\nshutdown_timeout: \"\\e[31m5s\\nFAKE\\u202E\"\n"))
        #expect(value.keyPath == "shutdown_timeout")
        #expect(!value.description.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E }, "\(value)")
        #expect(value.message.contains("\\u{1b}[31m5s\\nFAKE\\u{202e}"), "\(value.message)")
        let key = try #require(parseError(Self.minimal + "\nlimits: {\"max\\ein_flight\": 1}\n"))
        #expect(key.keyPath == "limits.max…", "\(key)")
        #expect(!key.description.unicodeScalars.contains { $0.value < 0x20 }, "\(key)")
    }

    @Test func durations() throws {
        func parse(_ text: String) throws -> Duration {
            try BridgeConfiguration.parse(yaml: Self.minimal + "\nshutdown_timeout: \(text)\n", environment: [:]).shutdownTimeout
        }
        #expect(try parse("250ms") == .milliseconds(250))
        #expect(try parse("10s") == .seconds(10))
        #expect(try parse("5m") == .seconds(300))
        #expect(try parse("1h") == .seconds(3600))
        for bad in ["10", "abc", "-5s", "1.5s", "0s", "10 s", "s", "99999999999999999999h"] {
            let error = try #require(parseError(Self.minimal + "\nshutdown_timeout: \"\(bad)\"\n"), "\(bad)")
            #expect(error.keyPath == "shutdown_timeout")
            #expect(error.message.contains("duration"))
        }
        #expect(DurationText.parse("100ms") == .milliseconds(100))
    }

    /// Caught by fuzz-configuration's check of accepted durations: `999999999999h` parsed, and
    /// the bridge's nanosecond arithmetic on it traps. Every duration key refuses more than 24h
    /// and names itself.
    @Test func durationsAboveOneDayAreRefused() throws {
        let keys = [
            ("apns: {request_timeout: %@}", "apns.request_timeout"),
            ("apns: {ping_interval: %@}", "apns.ping_interval"),
            ("apns: {retry: {initial_backoff: %@}}", "apns.retry.initial_backoff"),
            ("apns: {retry: {max_backoff: %@}}", "apns.retry.max_backoff"),
            ("shutdown_timeout: %@", "shutdown_timeout"),
        ]
        for (template, keyPath) in keys {
            let accepted = try BridgeConfiguration.parse(
                yaml: Self.minimal + "\n" + template.replacingOccurrences(of: "%@", with: "24h") + "\n", environment: [:])
            #expect(accepted.apns.requestTimeout <= .seconds(86_400) && accepted.shutdownTimeout <= .seconds(86_400))
            for value in ["25h", "1441m", "999999999999h"] {
                let yaml = Self.minimal + "\n" + template.replacingOccurrences(of: "%@", with: value) + "\n"
                let error = try #require(parseError(yaml), "\(keyPath) \(value)")
                #expect(error.keyPath == keyPath)
                #expect(error.message.contains("at most 24h"))
            }
        }
    }

    /// A PING interval or timeout under a second (`60ms` written for `60s`) would flood APNs
    /// with PINGs or replace healthy connections: refused, naming the key.
    @Test func pingDurationsUnderASecondAreRefused() throws {
        for key in ["ping_interval", "ping_timeout"] {
            let accepted = try BridgeConfiguration.parse(yaml: Self.minimal + "\napns: {\(key): 1s}\n", environment: [:])
            #expect(key == "ping_interval" ? accepted.apns.pingInterval == .seconds(1) : accepted.apns.pingTimeout == .seconds(1))
            for value in ["60ms", "999ms"] {
                let error = try #require(parseError(Self.minimal + "\napns: {\(key): \(value)}\n"), "\(key) \(value)")
                #expect(error.keyPath == "apns.\(key)")
                #expect(error.message == "expected a duration of at least 1s, got \"\(value)\"")
            }
        }
    }

    /// A request deadline under 100 ms (`10ms` written for `10s`) would time out every stream:
    /// refused, naming the key.
    @Test func aRequestTimeoutUnderAHundredMillisecondsIsRefused() throws {
        let accepted = try BridgeConfiguration.parse(yaml: Self.minimal + "\napns: {request_timeout: 100ms}\n", environment: [:])
        #expect(accepted.apns.requestTimeout == .milliseconds(100))
        for value in ["1ms", "10ms", "99ms"] {
            let error = try #require(parseError(Self.minimal + "\napns: {request_timeout: \(value)}\n"), "\(value)")
            #expect(error.keyPath == "apns.request_timeout")
            #expect(error.message == "expected a duration of at least 100ms, got \"\(value)\"")
        }
    }

    @Test func unknownKeysAreNamedWithTheirFullPath() throws {
        let cases: [(String, String)] = [
            (Self.minimal + "\nextra: 1\n", "extra"),
            (Self.minimal.replacingOccurrences(of: "brokers: k1:9092", with: "brokers: k1:9092\n  brokerz: x"), "kafka.brokerz"),
            (Self.minimal.replacingOccurrences(of: "team_id: TEAM123456}", with: "team_id: TEAM123456, key_idd: x}"), "apps[0].auth.key_idd"),
            // In `auth` too, a key with a value of its own is named, misspelt or not.
            (Self.minimal.replacingOccurrences(of: "team_id: TEAM123456}", with: "team_id: TEAM123456, colour: blue}"), "apps[0].auth.colour"),
            (Self.minimal + "\napns: {retry: {max_attempt: 3}}\n", "apns.retry.max_attempt"),
            (Self.minimal + "\nlog: {colour: true}\n", "log.colour"),
        ]
        for (yaml, path) in cases {
            let error = try #require(parseError(yaml), "\(path)")
            #expect(error.keyPath == path)
            #expect(error.message == "unknown key")
            #expect(error.description.hasPrefix("\(path): unknown key"))
            #expect(error.line != nil)
        }
        let second = Self.minimal + """

          - name: other
            bundle_id: com.example.other
            auth: {type: token, key_file: k.p8, key_idd: ABC123DEFG, team_id: TEAM123456}
        """
        #expect(parseError(second)?.keyPath == "apps[1].auth.key_idd")
    }

    /// An app's name and bundle id go into every result and invalid-token record: each is at
    /// most 255 bytes, so that those records stay within the producer's smallest record.
    @Test func appNamesAndBundleIDsAreBounded() throws {
        let longest = String(repeating: "a", count: AppSettings.maximumNameBytes)
        for (field, placeholder) in [("name", "chat"), ("bundle_id", "com.example.chat")] {
            let accepted = try BridgeConfiguration.parse(
                yaml: Self.minimal.replacingOccurrences(of: "\(field): \(placeholder)", with: "\(field): \(longest)"), environment: [:])
            #expect(field == "name" ? accepted.apps[0].name == longest : accepted.apps[0].bundleID == longest)
            let error = try #require(parseError(Self.minimal.replacingOccurrences(of: "\(field): \(placeholder)",
                                                                                  with: "\(field): \(longest)é")))
            #expect(error.keyPath == "apps[0].\(field)")
            #expect(error.message == "must be at most 255 bytes long")
        }
    }

    @Test func wrongTypesNameTheKeyAndValue() throws {
        let error = try #require(parseError(Self.minimal + "\nlimits:\n  max_in_flight: abc\n"))
        #expect(error.description.hasPrefix("limits.max_in_flight: expected an integer from 1 to 1000000, got \"abc\""))
        let cases: [(String, String)] = [
            ("limits: {max_tokens_per_request: 0}", "limits.max_tokens_per_request"),
            ("kafka2: 1", "kafka2"),
            ("log: {level: loud}", "log.level"),
            ("log: {format: xml}", "log.format"),
            ("http: {listen: nowhere}", "http.listen"),
            ("http: {listen: \"127.0.0.1:99999\"}", "http.listen"),
            ("apns: {production_url: http://api.push.apple.com}", "apns.production_url"),
            ("apns: {sandbox_url: [1]}", "apns.sandbox_url"),
            ("apns: {retry: {max_attempts: -1}}", "apns.retry.max_attempts"),
            ("apns: {retry: {max_attempts: 101}}", "apns.retry.max_attempts"),
            ("limits: {max_in_flight: 1000001}", "limits.max_in_flight"),
            ("limits: {max_in_flight: 99999999999999999999999}", "limits.max_in_flight"),
            ("limits: {max_tokens_per_request: 100001}", "limits.max_tokens_per_request"),
            ("apns: {retry: {initial_backoff: 10s, max_backoff: 1s}}", "apns.retry.max_backoff"),
            ("apns: {request_timeout: {a: 1}}", "apns.request_timeout"),
        ]
        for (extra, path) in cases {
            let found = try #require(parseError(Self.minimal + "\n" + extra + "\n"), "\(extra)")
            #expect(found.keyPath == path, "\(extra) → \(found)")
        }
        let exactlyOnce = try #require(parseError("kafka: {brokers: b, exactly_once: maybe}\napps: []\n"))
        #expect(exactlyOnce.keyPath == "kafka.exactly_once")
        let transactional = try BridgeConfiguration.parse(
            yaml: Self.minimal.replacingOccurrences(of: "kafka:\n", with: "kafka:\n  exactly_once: true\n"), environment: [:])
        #expect(transactional.kafka.exactlyOnce)
        let consumer = try #require(parseError("kafka: {brokers: b, consumer: {a: [1]}}\n"))
        #expect(consumer.keyPath == "kafka.consumer.a")
    }

    @Test func guaranteesCannotBeConfiguredAway() throws {
        let cases = [
            ("kafka: {brokers: b, consumer: {enable.auto.commit: false}}", "kafka.consumer.enable.auto.commit"),
            ("kafka: {brokers: b, consumer: {enable.auto.offset.store: true}}", "kafka.consumer.enable.auto.offset.store"),
            ("kafka: {brokers: b, consumer: {partition.assignment.strategy: range}}", "kafka.consumer.partition.assignment.strategy"),
            ("kafka: {brokers: b, consumer: {isolation.level: read_uncommitted}}", "kafka.consumer.isolation.level"),
            ("kafka: {brokers: b, consumer: {auto.offset.reset: latest}}", "kafka.consumer.auto.offset.reset"),
            ("kafka: {brokers: b, producer: {enable.idempotence: false}}", "kafka.producer.enable.idempotence"),
            ("kafka: {brokers: b, producer: {acks: 1}}", "kafka.producer.acks"),
            ("kafka: {brokers: b, producer: {request.required.acks: 1}}", "kafka.producer.request.required.acks"),
            ("kafka: {brokers: b, producer: {transactional.id: x}}", "kafka.producer.transactional.id"),
        ]
        let app = "apps:\n  - {name: a, bundle_id: com.x, auth: {type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM123456}}\n"
        for (kafka, path) in cases {
            let found = try #require(parseError(kafka + "\n" + app), "\(kafka)")
            #expect(found.keyPath == path, "\(kafka) → \(found)")
        }
    }

    @Test func requiredKeysAndAppRules() throws {
        #expect(parseError("")?.keyPath == "kafka.brokers")
        #expect(parseError("kafka: {group_id: g}\napps: []")?.keyPath == "kafka.brokers")
        #expect(parseError("kafka: {brokers: b}\n")?.keyPath == "apps")
        #expect(parseError("kafka: {brokers: b}\napps: []\n")?.message == "at least one app is required")
        #expect(parseError("[1, 2]")?.keyPath == "")
        #expect(parseError("kafka: [\n")?.message.hasPrefix("invalid YAML: line") == true)

        let app = "  - {name: %@, bundle_id: com.x, auth: {type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM123456}}\n"
        let duplicate = "kafka: {brokers: b}\napps:\n" + app.replacingOccurrences(of: "%@", with: "a")
            + app.replacingOccurrences(of: "%@", with: "a")
        let duplicateError = try #require(parseError(duplicate))
        #expect(duplicateError.keyPath == "apps[1].name")
        #expect(duplicateError.message.contains("duplicate app name"))

        func authError(_ auth: String) -> ConfigurationError? {
            parseError("kafka: {brokers: b}\napps:\n  - {name: a, bundle_id: com.x, auth: \(auth)}\n")
        }
        #expect(authError("{type: token, key_file: k, key_id: SHORT, team_id: TEAM123456}")?.keyPath == "apps[0].auth.key_id")
        #expect(authError("{type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM1234567}")?.keyPath == "apps[0].auth.team_id")
        #expect(authError("{type: token, key_id: ABC123DEFG, team_id: TEAM123456}")?.keyPath == "apps[0].auth.key_file")
        #expect(authError("{type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM123456, cert_file: c}")?.keyPath
                == "apps[0].auth.cert_file")
        #expect(authError("{type: magic}")?.keyPath == "apps[0].auth.type")
        #expect(authError("{type: certificate}")?.keyPath == "apps[0].auth.cert_file")
        #expect(authError("{type: certificate, cert_file: c}")?.keyPath == "apps[0].auth.key_file")
        #expect(authError("{type: certificate, cert_file: c, key_file: k, p12_file: p}")?.keyPath == "apps[0].auth")
        #expect(authError("{type: certificate, key_id: ABC123DEFG, p12_file: p}")?.keyPath == "apps[0].auth.key_id")
        #expect(parseError("kafka: {brokers: b}\napps:\n  - {name: a, auth: {type: token}}\n")?.keyPath == "apps[0].bundle_id")
        #expect(parseError("kafka: {brokers: b}\napps:\n  - {name: a, bundle_id: b, connections: 0, auth: {}}\n")?.keyPath
                == "apps[0].auth.type")
        #expect(parseError(Self.minimal.replacingOccurrences(of: "bundle_id: com.example.chat",
                                                             with: "bundle_id: com.example.chat\n    connections: 0"))?.keyPath
                == "apps[0].connections")
        #expect(parseError(Self.minimal.replacingOccurrences(of: "bundle_id: com.example.chat",
                                                             with: "bundle_id: com.example.chat\n    connections: 101"))?.description
                .hasPrefix("apps[0].connections: expected an integer from 1 to 100, got \"101\"") == true)
        #expect(parseError(Self.minimal.replacingOccurrences(of: "bundle_id: com.example.chat",
                                                             with: "bundle_id: com.example.chat\n    environment: staging"))?.keyPath
                == "apps[0].environment")
    }

    @Test func passphraseNeverAppearsInErrorsOrDescriptions() throws {
        let secret = "hunter2-VERY-SECRET"
        let yaml = """
        kafka: {brokers: b}
        apps:
          - name: legacy
            bundle_id: com.example.legacy
            auth: {type: certificate, cert_file: c.pem, key_file: k.pem, passphrase: "${PASS}"}
        """
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: ["PASS": secret])
        #expect(configuration.apps[0].auth == .certificate(certFile: "c.pem", keyFile: "k.pem", passphrase: secret))
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in [String(describing: configuration), String(reflecting: configuration), dumped,
                     "\(configuration.apps[0].auth)"] {
            #expect(!text.contains(secret))
        }
        // A passphrase of the wrong type is reported without its value.
        let wrongType = yaml.replacingOccurrences(of: "\"${PASS}\"", with: "[\(secret)]")
        let listError = try #require(parseError(wrongType))
        #expect(listError.keyPath == "apps[0].auth.passphrase")
        #expect(!listError.description.contains(secret))
        // A later error in the same app does not show it either.
        let laterError = try #require(parseError(yaml.replacingOccurrences(of: "key_file: k.pem, ", with: "") ,
                                                 environment: ["PASS": secret]))
        #expect(laterError.keyPath == "apps[0].auth.key_file")
        #expect(!laterError.description.contains(secret))
        // Tokens auth must not have a passphrase; its value is not echoed.
        let tokenWithPass = "kafka: {brokers: b}\napps:\n  - {name: a, bundle_id: c, auth: {type: token, key_file: k, key_id: ABC123DEFG, team_id: TEAM123456, passphrase: \(secret)}}\n"
        let tokenError = try #require(parseError(tokenWithPass))
        #expect(tokenError.keyPath == "apps[0].auth.passphrase")
        #expect(!tokenError.description.contains(secret))
    }

    @Test func brokersListAndListenForms() throws {
        let yaml = Self.minimal.replacingOccurrences(of: "brokers: k1:9092", with: "brokers: [k1:9092, k2:9092]")
            + "\nhttp: {listen: \"[::1]:0\"}\napns: {production_url: \"https://[::1]:8443/\", sandbox_url: https://sim.local, ca_file: ca.pem}\n"
        let configuration = try BridgeConfiguration.parse(yaml: yaml, environment: [:])
        #expect(configuration.kafka.brokers == "k1:9092,k2:9092")
        #expect(configuration.http == HTTPSettings(host: "::1", port: 0))
        #expect(configuration.apns.productionURL == APNsEndpoint(host: "::1", port: 8443))
        #expect(configuration.apns.sandboxURL == APNsEndpoint(host: "sim.local", port: 443))
        #expect(configuration.apns.caFile == "ca.pem")
        #expect(configuration.apns.endpoint(for: .sandbox).host == "sim.local")
    }

    @Test func loadReadsAFileAndReportsAMissingOne() throws {
        let path = "/tmp/apns-bridge-config-test-\(UInt32.random(in: 0...UInt32.max)).yaml"
        try Self.minimal.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try BridgeConfiguration.load(path: path, environment: [:])
        #expect(configuration.apps[0].name == "chat")
        #expect(throws: ConfigurationError.self) { _ = try BridgeConfiguration.load(path: path + ".missing", environment: [:]) }
    }
}
