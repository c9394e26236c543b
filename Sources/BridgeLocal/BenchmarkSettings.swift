import Bridge
/// What `apns-bridge bench` runs: the workload's shape and the bridge's and simulator's settings.
public struct BenchmarkSettings: Sendable, Equatable {
    /// Request records to produce.
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
    /// Whether to measure the simulator with h2load first.
    public var runH2Load: Bool
    /// The most notifications the h2load reference sends.
    public var h2loadNotificationCap: Int
    /// Give up when no result arrived for this long.
    public var idleTimeoutSeconds: Double
    /// Run the bridge with `kafka.exactly_once: true` (transactions) instead of at least once.
    public var exactlyOnce: Bool

    /// The defaults of `apns-bridge bench`: 20,000 requests of 5 tokens (100,000 notifications).
    public init(requests: Int = 20_000, tokensPerRequest: Int = 5, partitions: Int = 8, connections: Int = 4,
                maxInFlight: Int = 20_000, simulatorThreads: Int = 1, runH2Load: Bool = true,
                h2loadNotificationCap: Int = 200_000, idleTimeoutSeconds: Double = 30, exactlyOnce: Bool = false) {
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
    }

    /// Notifications (and results) the workload yields.
    public var notifications: Int { requests * tokensPerRequest }
}
