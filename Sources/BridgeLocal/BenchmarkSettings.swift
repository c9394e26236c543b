import Bridge
/// What `apns-bridge bench` runs: the workload's shape and the bridge's and simulator's settings.
public struct BenchmarkSettings: Sendable, Equatable {
    /// Request records to produce (for each peak round, and again for the paced run).
    public var requests: Int
    /// Distinct device tokens in each request (one notification and one result each).
    public var tokensPerRequest: Int
    /// Partitions of every topic of the mock cluster (may be raised, see `MockPartitionBudget`).
    public var partitions: Int
    /// HTTP/2 connections of the app's pool (and of the h2load reference run).
    public var connections: Int
    /// The bridge's `limits.max_in_flight`.
    public var maxInFlight: Int
    /// Event loop threads of the simulator.
    public var simulatorThreads: Int
    /// Time the simulator waits before answering each stream (APNs' round trip); zero by default.
    public var simulatorLatencyMilliseconds: Int = 0
    /// The simulator's SETTINGS_MAX_CONCURRENT_STREAMS (streams per connection).
    public var simulatorStreams: Int = 1000
    /// Whether to measure the simulator with h2load in each round.
    public var runH2Load: Bool
    /// The most notifications the h2load reference sends.
    public var h2loadNotificationCap: Int
    /// Peak rounds: each an h2load run (unless `runH2Load` is off), then the bridge's peak run.
    /// The report gives the round of median share: on a shared 2-core machine one run's rate
    /// moves by a quarter from one minute to the next, so each share is taken within a round.
    public var rounds: Int = 3
    /// Give up when no result arrived for this long.
    public var idleTimeoutSeconds: Double
    /// Run the bridge with `kafka.exactly_once: true` (transactions) instead of at least once.
    public var exactlyOnce: Bool
    /// `apns-bridge run` processes in the bridge's group.
    public var instances: Int
    /// Whether to run the paced phase (added latency) after the peak run.
    public var runPaced: Bool
    /// Requests per second of the paced run; nil: half of the peak just measured.
    public var pacedRate: Double?
    /// The `apns-bridge` executable started as `apns-bridge run`.
    public var executable: String
    /// librdkafka consumer properties added to the instances' `kafka.consumer` (e.g. `fetch.wait.max.ms`).
    public var consumerProperties: [String: String] = [:]
    /// The instances' log level.
    public var bridgeLogLevel: String
    /// A command (and its arguments) each instance is started under, e.g. `valgrind
    /// --tool=callgrind` for instruction counts; empty: the executable itself.
    public var wrapper: [String] = []

    /// The defaults of `apns-bridge bench`: 100,000 single-token requests, one instance.
    public init(requests: Int = 100_000, tokensPerRequest: Int = 1, partitions: Int = 8, connections: Int = 4,
                maxInFlight: Int = 20_000, simulatorThreads: Int = 1, runH2Load: Bool = true,
                h2loadNotificationCap: Int = 200_000, idleTimeoutSeconds: Double = 30, exactlyOnce: Bool = false,
                instances: Int = 1, runPaced: Bool = true, pacedRate: Double? = nil,
                executable: String, bridgeLogLevel: String = "warning") {
        self.requests = requests
        self.tokensPerRequest = tokensPerRequest
        self.partitions = partitions
        self.connections = connections
        self.maxInFlight = maxInFlight
        self.simulatorThreads = simulatorThreads
        self.runH2Load = runH2Load
        self.h2loadNotificationCap = h2loadNotificationCap
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.exactlyOnce = exactlyOnce
        self.instances = instances
        self.runPaced = runPaced
        self.pacedRate = pacedRate
        self.executable = executable
        self.bridgeLogLevel = bridgeLogLevel
    }

    /// The instances' `kafka.consumer`: `fetch.wait.max.ms: 1` unless `consumerProperties` set
    /// it, then `consumerProperties`. librdkafka 2.0.2's mock broker holds a fetch that found
    /// nothing new for the whole `fetch.wait.max.ms` (500 ms by default), even if records arrive
    /// meanwhile; a real broker answers as soon as they arrive. The shortest wait comes closest
    /// to that, so the paced run's added latency measures the bridge, not the mock broker's wait.
    public var bridgeConsumerProperties: [String: String] {
        ["fetch.wait.max.ms": "1"].merging(consumerProperties) { _, given in given }
    }

    /// Notifications (and results) one run of the workload yields.
    public var notifications: Int { requests * tokensPerRequest }
}
