import APNs
@testable import Bridge
import Foundation
import Kafka
import Metrics
import Testing

@Suite struct BridgeMetricsTests {
    static let configuration: BridgeConfiguration = {
        let yaml = """
        kafka: {brokers: "localhost:9092", topics: [apns.requests, apns.bulk]}
        apps:
          - {name: chat, bundle_id: com.example.chat, auth: {type: token, key_file: k.p8, key_id: ABC123DEFG, team_id: TEAM123456}}
          - {name: news, bundle_id: com.example.news, environment: sandbox, auth: {type: token, key_file: k.p8, key_id: ABC123DEFG, team_id: TEAM123456}}
        """
        // invariant: the literal above is a valid configuration.
        return try! BridgeConfiguration.parse(yaml: yaml, environment: [:])
    }()

    static func samples(_ text: String, _ name: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            let parts = line.split(separator: " ")
            values[String(parts[0])] = Double(parts[1])
        }
        return values
    }

    @Test func eachOutcomeCountsInItsOwnSeries() {
        let metrics = BridgeMetrics(configuration: Self.configuration)
        for (index, outcome) in PushOutcome.allCases.enumerated() {
            #expect(MetricLabels.outcomeIndex(outcome) == index)
            for _ in 0...index { metrics.recordResult(app: "chat", outcome: outcome, latencyMilliseconds: nil) }
        }
        let text = metrics.registry.render()
        for (index, outcome) in PushOutcome.allCases.enumerated() {
            #expect(text.contains("apns_bridge_notifications_total{app=\"chat\",outcome=\"\(outcome.rawValue)\"} \(index + 1)\n"))
        }
    }

    @Test func everyConfiguredSeriesStartsAtZero() {
        let metrics = BridgeMetrics(configuration: Self.configuration)
        let text = metrics.registry.render()
        for app in ["chat", "news"] {
            for outcome in PushOutcome.allCases {
                #expect(text.contains("apns_bridge_notifications_total{app=\"\(app)\",outcome=\"\(outcome.rawValue)\"} 0\n"))
            }
            #expect(text.contains("apns_bridge_invalid_tokens_total{app=\"\(app)\",reason=\"Unregistered\"} 0\n"))
            #expect(text.contains("apns_bridge_apns_request_duration_seconds_bucket{app=\"\(app)\",le=\"0.001\"} 0\n"))
            #expect(text.contains("apns_bridge_apns_request_duration_seconds_bucket{app=\"\(app)\",le=\"10\"} 0\n"))
        }
        #expect(text.contains("apns_bridge_records_consumed_total{topic=\"apns.bulk\"} 0\n"))
        #expect(text.contains("apns_bridge_dead_letters_total{error=\"invalid_json\"} 0\n"))
        #expect(text.contains("# TYPE apns_bridge_apns_responses_total counter\n"))
        // The answers that say an app's credentials are refused, for the alert on their increase;
        // no other answer's series until it happens.
        let responses = Self.samples(text, "apns_bridge_apns_responses_total")
        #expect(responses.count == 2 * MetricLabels.credentialRefusalReasons.count)
        for app in ["chat", "news"] {
            for reason in ["InvalidProviderToken", "BadCertificate", "MissingProviderToken", "Forbidden"] {
                #expect(responses["apns_bridge_apns_responses_total{app=\"\(app)\",status=\"403\",reason=\"\(reason)\"}"] == 0)
            }
        }
        #expect(text.contains("# TYPE apns_bridge_retries_total counter\n"))
        #expect(text.contains("# TYPE process_cpu_seconds_total counter\n"))
    }

    @Test func eventsLandInTheirSeries() {
        let metrics = BridgeMetrics(configuration: Self.configuration)
        metrics.recordConsumed(topic: "apns.requests")
        metrics.recordConsumed(topic: "apns.requests")
        metrics.recordDeadLetter(.payloadTooLarge)
        metrics.recordDeadLetter(DeadLetterCode(rawValue: "a_code_added_later"))
        metrics.recordResult(app: "chat", outcome: .delivered, latencyMilliseconds: 40)
        metrics.recordResult(app: "chat", outcome: .rejected, latencyMilliseconds: nil)
        // A producer's clock ahead of the bridge's: counted, its latency not observed.
        metrics.recordResult(app: "chat", outcome: .failed, latencyMilliseconds: -3_596_352.2)
        metrics.recordResult(app: "nobody", outcome: .delivered, latencyMilliseconds: 1)
        metrics.recordInvalidToken(app: "news", reason: "BadDeviceToken")
        metrics.poolObserver(pool: "chat/production")?.apnsAnswered(status: 200, reason: nil, durationNanoseconds: 3_000_000)
        metrics.poolObserver(pool: "chat/sandbox")?.apnsAnswered(status: 410, reason: "Unregistered", durationNanoseconds: 30_000_000)
        metrics.poolObserver(pool: "news/sandbox")?.apnsRetrying(.status429)
        #expect(metrics.poolObserver(pool: "nobody/production") == nil)

        let text = metrics.registry.render()
        #expect(Self.samples(text, "apns_bridge_records_consumed_total")["apns_bridge_records_consumed_total{topic=\"apns.requests\"}"] == 2)
        #expect(text.contains("apns_bridge_dead_letters_total{error=\"payload_too_large\"} 1\n"))
        #expect(text.contains("apns_bridge_dead_letters_total{error=\"other\"} 1\n"))
        #expect(text.contains("apns_bridge_notifications_total{app=\"chat\",outcome=\"delivered\"} 1\n"))
        #expect(text.contains("apns_bridge_notifications_total{app=\"chat\",outcome=\"rejected\"} 1\n"))
        #expect(text.contains("apns_bridge_notifications_total{app=\"chat\",outcome=\"failed\"} 1\n"))
        #expect(!text.contains("nobody"))
        #expect(text.contains("apns_bridge_end_to_end_latency_seconds_bucket{app=\"chat\",le=\"0.05\"} 1\n"))
        #expect(text.contains("apns_bridge_end_to_end_latency_seconds_count{app=\"chat\"} 1\n"))
        #expect(text.contains("apns_bridge_invalid_tokens_total{app=\"news\",reason=\"BadDeviceToken\"} 1\n"))
        #expect(text.contains("apns_bridge_apns_responses_total{app=\"chat\",status=\"200\",reason=\"none\"} 1\n"))
        #expect(text.contains("apns_bridge_apns_responses_total{app=\"chat\",status=\"410\",reason=\"Unregistered\"} 1\n"))
        #expect(text.contains("apns_bridge_apns_request_duration_seconds_bucket{app=\"chat\",le=\"0.0025\"} 0\n"))
        #expect(text.contains("apns_bridge_apns_request_duration_seconds_bucket{app=\"chat\",le=\"0.005\"} 1\n"))
        #expect(text.contains("apns_bridge_apns_request_duration_seconds_count{app=\"chat\"} 2\n"))
        #expect(text.contains("apns_bridge_retries_total{app=\"news\",cause=\"status_429\"} 1\n"))
    }

    /// Connection closes are counted by app and reason, every reason's series there from the
    /// start; a shutdown's closes are not counted.
    @Test func connectionClosesAreCountedByReason() throws {
        let metrics = BridgeMetrics(configuration: Self.configuration)
        let observer = try #require(metrics.poolObserver(pool: "chat/production"))
        #expect(metrics.registry.render().contains("apns_bridge_connection_closes_total{app=\"chat\",reason=\"lost\"} 0\n"))
        observer.apnsConnectionClosed(.lost("Connection reset by peer"))
        observer.apnsConnectionClosed(.lost("end of stream"))
        observer.apnsConnectionClosed(.goAway)
        observer.apnsConnectionClosed(.connectFailed("TLS handshake failed"))
        observer.apnsConnectionClosed(.shutdown)
        let closes = Self.samples(metrics.registry.render(), "apns_bridge_connection_closes_total").filter { $0.value != 0 }
        #expect(closes == [
            "apns_bridge_connection_closes_total{app=\"chat\",reason=\"lost\"}": 2,
            "apns_bridge_connection_closes_total{app=\"chat\",reason=\"goaway\"}": 1,
            "apns_bridge_connection_closes_total{app=\"chat\",reason=\"connect_failed\"}": 1,
        ])
    }

    /// What APNs (or anything posing as it) sends cannot create series without bound (retry
    /// causes are the pool's enum, bounded by their type).
    @Test func unknownStatusesAndReasonsAreCountedAsOther() throws {
        let metrics = BridgeMetrics(configuration: Self.configuration)
        let observer = try #require(metrics.poolObserver(pool: "chat/production"))
        for index in 0..<500 {
            observer.apnsAnswered(status: 600 + index, reason: "Invented\(index)", durationNanoseconds: 0)
            observer.apnsAnswered(status: 400, reason: "\(index)\"\n{", durationNanoseconds: 0)
            metrics.recordInvalidToken(app: "chat", reason: "Reason\(index)")
        }
        let text = metrics.registry.render()
        let responses = Self.samples(text, "apns_bridge_apns_responses_total").filter { $0.value != 0 }
        #expect(responses == [
            "apns_bridge_apns_responses_total{app=\"chat\",status=\"other\",reason=\"other\"}": 500,
            "apns_bridge_apns_responses_total{app=\"chat\",status=\"400\",reason=\"other\"}": 500,
        ])
        #expect(text.contains("apns_bridge_invalid_tokens_total{app=\"chat\",reason=\"other\"} 500\n"))
        #expect(text.split(separator: "\n").count < 400)
    }

    @Test func labelTablesCoverAppleDocumentedValues() {
        #expect(MetricLabels.reasonIndex(nil) == 0)
        #expect(MetricLabels.reasonValues[MetricLabels.reasonIndex("TooManyProviderTokenUpdates")] == "TooManyProviderTokenUpdates")
        #expect(MetricLabels.statusValues[MetricLabels.statusIndex(503)] == "503")
        #expect(MetricLabels.statusValues[MetricLabels.statusIndex(299)] == "other")
        #expect(MetricLabels.statusValues[MetricLabels.statusIndex(502)] == "5xx")
        #expect(MetricLabels.statusValues[MetricLabels.statusIndex(504)] == "5xx")
        #expect(MetricLabels.statusValues[MetricLabels.statusIndex(418)] == "4xx")
        #expect(MetricLabels.statusValues[MetricLabels.statusIndex(600)] == "other")
        #expect(MetricLabels.statusValues[MetricLabels.statusIndex(-1)] == "other")
        #expect(Set(MetricLabels.reasonValues).count == MetricLabels.reasonValues.count)
    }
}

@Suite struct ConsumerLagStatisticsTests {
    /// The shape librdkafka 2.0.2 emits (abridged): per topic, per partition, with the internal
    /// partition -1 and partitions whose lag is not known yet (-1).
    @Test func lagIsReadPerKnownPartition() {
        let json = """
        {"name":"rdkafka#consumer-1","type":"consumer","ts":123,"brokers":{"b":{"name":"b"}},
         "topics":{
           "apns.requests":{"topic":"apns.requests","partitions":{
             "0":{"partition":0,"consumer_lag":42,"consumer_lag_stored":40,"hi_offset":100},
             "1":{"partition":1,"consumer_lag":-1},
             "-1":{"partition":-1,"consumer_lag":-1}}},
           "apns.bulk":{"topic":"apns.bulk","partitions":{"3":{"partition":3,"consumer_lag":0}}}},
         "cgrp":{"state":"up"}}
        """
        let lag = ConsumerLagStatistics.parse(Array(json.utf8))
        #expect(lag == [
            KafkaTopicPartition(topic: "apns.requests", partition: 0): 42,
            KafkaTopicPartition(topic: "apns.bulk", partition: 3): 0,
        ])
    }

    /// Before any offset of a partition is committed or stored, librdkafka reports no lag:
    /// the whole partition is behind (the consumer reads a group without commits from the start).
    @Test func withNothingCommittedYetTheLagIsTheWholePartition() {
        let json = """
        {"topics":{"apns.requests":{"partitions":{
           "0":{"partition":0,"consumer_lag":-1,"committed_offset":-1001,"stored_offset":-1001,"lo_offset":5,"hi_offset":25},
           "1":{"partition":1,"consumer_lag":-1,"committed_offset":-1001,"stored_offset":-1001,"lo_offset":-1001,"hi_offset":-1001},
           "2":{"partition":2,"consumer_lag":-1,"committed_offset":7,"stored_offset":-1001,"lo_offset":0,"hi_offset":9}}}}}
        """
        #expect(ConsumerLagStatistics.parse(Array(json.utf8)) == [KafkaTopicPartition(topic: "apns.requests", partition: 0): 20])
        // The committed offsets, for the lag of a paused partition.
        #expect(ConsumerLagStatistics.snapshot(Array(json.utf8)).committed == [KafkaTopicPartition(topic: "apns.requests", partition: 2): 7])
    }

    /// A paused partition's lag: its high watermark less the committed offset (the low
    /// watermark where nothing is committed, or the log start moved past the commit), never
    /// less than what the statistics reported, and what they reported when nothing was asked.
    @Test func aPausedPartitionsLagComesFromItsWatermarks() {
        #expect(PausedPartitionLagProbe.lag(of: (low: 0, high: 50), committed: 20, reported: 3) == 30)
        #expect(PausedPartitionLagProbe.lag(of: (low: 10, high: 50), committed: nil, reported: nil) == 40)
        #expect(PausedPartitionLagProbe.lag(of: (low: 40, high: 50), committed: 20, reported: nil) == 10)
        #expect(PausedPartitionLagProbe.lag(of: (low: 0, high: 50), committed: 45, reported: 9) == 9)
        #expect(PausedPartitionLagProbe.lag(of: nil, committed: 20, reported: 4) == 4)
        #expect(PausedPartitionLagProbe.lag(of: nil, committed: nil, reported: nil) == nil)
    }

    @Test(arguments: ["", "not json", "[]", #"{"topics":[]}"#, #"{"topics":{"t":{"partitions":{"0":{"partition":"0","consumer_lag":"5"}}}}}"#])
    func unusableStatisticsGiveNoLag(json: String) {
        #expect(ConsumerLagStatistics.parse(Array(json.utf8)).isEmpty)
    }

    @Test func theStatisticsIntervalIsSetUnlessTheOperatorChoseOne() {
        var kafka = BridgeMetricsTests.configuration.kafka
        #expect(BridgePipeline.consumerProperties(kafka)["statistics.interval.ms"] == "5000")
        kafka.consumer["statistics.interval.ms"] = "60000"
        #expect(BridgePipeline.consumerProperties(kafka)["statistics.interval.ms"] == "60000")
    }
}
