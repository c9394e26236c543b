import Synchronization

/// A monotonically increasing count (Prometheus counter), shaped like swift-metrics' `Counter`.
///
/// Creating a `Counter` looks its series up in the registry (taking the registry's lock once);
/// keep the value and call ``increment(by:)`` on the hot path, which is one relaxed atomic add.
/// Two `Counter`s with the same label and dimensions share one series.
public struct Counter: Sendable {
    let storage: CounterStorage

    /// The series `label{dimensions}` of `registry`, created at zero on first use.
    public init(label: String, dimensions: [(String, String)] = [], registry: MetricsRegistry) {
        storage = registry.counterStorage(name: label, dimensions: dimensions)
    }

    /// Adds `amount`.
    @inline(__always)
    public func increment(by amount: UInt64 = 1) {
        storage.value.add(amount, ordering: .relaxed)
    }

    /// The current count.
    public var value: UInt64 { storage.value.load(ordering: .relaxed) }
}

/// A value that goes up and down (Prometheus gauge), shaped like swift-metrics' `Gauge`.
public struct Gauge: Sendable {
    let storage: GaugeStorage

    /// The series `label{dimensions}` of `registry`, created at zero on first use.
    public init(label: String, dimensions: [(String, String)] = [], registry: MetricsRegistry) {
        storage = registry.gaugeStorage(name: label, dimensions: dimensions)
    }

    /// Sets the value.
    public func set(_ value: Double) { storage.set(value) }

    /// Adds `delta` (negative to subtract).
    public func add(_ delta: Double) { storage.add(delta) }

    /// The current value.
    public var value: Double { storage.value }
}

/// A distribution of observed values in fixed buckets (Prometheus histogram), shaped like
/// swift-metrics' `Recorder` with aggregation.
///
/// The bucket bounds belong to the metric name: they are set by
/// ``MetricsRegistry/describe(_:_:help:buckets:)`` (``Histogram/defaultBuckets`` otherwise).
public struct Histogram: Sendable {
    let storage: HistogramStorage

    /// Prometheus' client default bounds, in seconds (5 ms to 10 s).
    public static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// The series `label{dimensions}` of `registry`, created empty on first use.
    public init(label: String, dimensions: [(String, String)] = [], registry: MetricsRegistry) {
        storage = registry.histogramStorage(name: label, dimensions: dimensions)
    }

    /// Records one observation.
    @inline(__always)
    public func record(_ value: Double) {
        storage.observe(value)
    }

    /// Observations so far (the `_count` of the series).
    public var count: UInt64 { storage.snapshot().cumulative.last ?? 0 }

    /// The sum of the observations (the `_sum` of the series).
    public var sum: Double { storage.snapshot().sum }
}
