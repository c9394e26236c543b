import Observability

/// The kind of a metric family, as written on its `# TYPE` line.
public enum MetricType: String, Sendable {
    case counter, gauge, histogram
}

/// One value a ``MetricsCollector`` reports at scrape time.
public struct MetricSample: Sendable {
    /// Label names and values, in the order they are written.
    public var labels: [(String, String)]
    /// The value.
    public var value: Double

    /// A sample.
    public init(labels: [(String, String)] = [], value: Double) {
        self.labels = labels
        self.value = value
    }
}

/// A family whose samples are computed when `/metrics` is read (process figures, values owned
/// by other components such as the in-flight count or consumer lag).
public struct MetricsCollector: Sendable {
    /// The metric name.
    public var name: String
    /// `counter` or `gauge`.
    public var type: MetricType
    /// The `# HELP` text.
    public var help: String
    /// Called on the scraping thread; must be quick and must not block.
    public var collect: @Sendable () -> [MetricSample]

    /// A collector.
    public init(name: String, type: MetricType, help: String, collect: @escaping @Sendable () -> [MetricSample]) {
        precondition(type != .histogram, "collectors report counters and gauges")  // invariant: programmer error
        self.name = name
        self.type = type
        self.help = help
        self.collect = collect
    }
}

/// A set of metric families, read in the Prometheus text format by ``render()``.
///
/// Thread-safe. Creating a series takes the registry's lock; updating one never does (see
/// ``Counter``). Series are never removed: label values must come from bounded sets.
public final class MetricsRegistry: Sendable {
    enum Storage {
        case counter(CounterStorage)
        case gauge(GaugeStorage)
        case histogram(HistogramStorage)
    }

    struct Series {
        /// `name="value",…` with values escaped (no braces); empty without labels.
        var labels: String
        var storage: Storage
    }

    struct Family {
        var name: String
        var type: MetricType
        var help: String
        var buckets: [Double]
        var series: [Series] = []
        var seriesIndex: [String: Int] = [:]
    }

    private struct State {
        var families: [String: Family] = [:]
        var collectors: [MetricsCollector] = []
    }

    private let state = Locked(State())

    /// An empty registry.
    public init() {}

    /// Declares a family: its type, `# HELP` text and, for histograms, bucket upper bounds.
    ///
    /// A declared family is written (HELP and TYPE) even before it has a series, so every name an
    /// operator looks for is there from the first scrape. Declaring it again updates the help.
    public func describe(_ name: String, _ type: MetricType, help: String, buckets: [Double]? = nil) {
        precondition(Self.isValidMetricName(name), "invalid metric name \(name)")  // invariant: programmer error
        let bounds = (buckets ?? Histogram.defaultBuckets).sorted()
        state.withLock { state in
            if var family = state.families[name] {
                precondition(family.type == type, "\(name) declared as \(type) and \(family.type)")  // invariant
                family.help = help
                state.families[name] = family
            } else {
                state.families[name] = Family(name: name, type: type, help: help, buckets: bounds)
            }
        }
    }

    /// Adds a family computed at scrape time.
    public func register(_ collector: MetricsCollector) {
        precondition(Self.isValidMetricName(collector.name), "invalid metric name \(collector.name)")  // invariant
        state.withLock { state in
            // invariant: one family per name (a collector's name is not also declared).
            precondition(state.families[collector.name] == nil && !state.collectors.contains { $0.name == collector.name },
                         "metric family \(collector.name) registered twice")
            state.collectors.append(collector)
        }
    }

    func counterStorage(name: String, dimensions: [(String, String)]) -> CounterStorage {
        let storage = series(name: name, type: .counter, dimensions: dimensions) { _ in .counter(CounterStorage()) }
        guard case .counter(let counter) = storage else { preconditionFailure("\(name) is not a counter") }  // invariant
        return counter
    }

    func gaugeStorage(name: String, dimensions: [(String, String)]) -> GaugeStorage {
        let storage = series(name: name, type: .gauge, dimensions: dimensions) { _ in .gauge(GaugeStorage()) }
        guard case .gauge(let gauge) = storage else { preconditionFailure("\(name) is not a gauge") }  // invariant
        return gauge
    }

    func histogramStorage(name: String, dimensions: [(String, String)]) -> HistogramStorage {
        let storage = series(name: name, type: .histogram, dimensions: dimensions) { family in
            .histogram(HistogramStorage(upperBounds: family.buckets))
        }
        guard case .histogram(let histogram) = storage else { preconditionFailure("\(name) is not a histogram") }  // invariant
        return histogram
    }

    private func series(
        name: String, type: MetricType, dimensions: [(String, String)], make: (Family) -> Storage
    ) -> Storage {
        // invariant: metric and label names are written by the program, never taken from input.
        precondition(Self.isValidMetricName(name), "invalid metric name \(name)")
        precondition(dimensions.allSatisfy { Self.isValidLabelName($0.0) && $0.0 != "le" }, "invalid label name in \(name)")
        let labels = PrometheusText.labels(dimensions)
        return state.withLock { state in
            var family = state.families[name] ?? Family(
                name: name, type: type, help: "", buckets: Histogram.defaultBuckets)
            precondition(family.type == type, "\(name) used as \(type) and \(family.type)")  // invariant: programmer error
            if let index = family.seriesIndex[labels] { return family.series[index].storage }
            let storage = make(family)
            family.seriesIndex[labels] = family.series.count
            family.series.append(Series(labels: labels, storage: storage))
            state.families[name] = family
            return storage
        }
    }

    /// Every family in the Prometheus text exposition format 0.0.4, sorted by name.
    ///
    /// Collectors run on the calling thread, outside the registry's lock.
    public func render() -> String {
        let (families, collectors) = state.withLock { (Array($0.families.values), $0.collectors) }
        var output = ""
        output.reserveCapacity(16_384)
        var collected = collectors.map { collector in (collector, collector.collect()) }
        collected.sort { $0.0.name < $1.0.name }
        var collectedIndex = 0
        for family in families.sorted(by: { $0.name < $1.name }) {
            while collectedIndex < collected.count, collected[collectedIndex].0.name < family.name {
                PrometheusText.append(collector: collected[collectedIndex].0, samples: collected[collectedIndex].1, to: &output)
                collectedIndex += 1
            }
            PrometheusText.append(family: family, to: &output)
        }
        while collectedIndex < collected.count {
            PrometheusText.append(collector: collected[collectedIndex].0, samples: collected[collectedIndex].1, to: &output)
            collectedIndex += 1
        }
        return output
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    static func isValidMetricName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return name.utf8.allSatisfy { isNameByte($0) || $0 == UInt8(ascii: ":") }
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved by Prometheus).
    static func isValidLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
              !name.hasPrefix("__") else { return false }
        return name.utf8.allSatisfy(isNameByte)
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"): true
        default: false
        }
    }
}
