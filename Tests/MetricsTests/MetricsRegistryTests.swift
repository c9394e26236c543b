import Foundation
@testable import Metrics
import Synchronization
import Testing

@Suite struct MetricsRegistryTests {
    @Test func countersWithTheSameLabelsShareOneSeries() {
        let registry = MetricsRegistry()
        registry.describe("jobs_total", .counter, help: "Jobs done.")
        let first = Counter(label: "jobs_total", dimensions: [("kind", "a")], registry: registry)
        let again = Counter(label: "jobs_total", dimensions: [("kind", "a")], registry: registry)
        let other = Counter(label: "jobs_total", dimensions: [("kind", "b")], registry: registry)
        first.increment()
        again.increment(by: 2)
        other.increment()

        #expect(first.value == 3)
        #expect(registry.render() == """
            # HELP jobs_total Jobs done.
            # TYPE jobs_total counter
            jobs_total{kind="a"} 3
            jobs_total{kind="b"} 1

            """)
    }

    @Test func aDescribedFamilyIsWrittenBeforeItHasASeries() {
        let registry = MetricsRegistry()
        registry.describe("retries_total", .counter, help: "Retries.")
        #expect(registry.render() == "# HELP retries_total Retries.\n# TYPE retries_total counter\n")
    }

    @Test func histogramBucketsAreCumulativeAndEndWithInfinity() {
        let registry = MetricsRegistry()
        registry.describe("latency_seconds", .histogram, help: "Latency.", buckets: [0.01, 0.1, 1])
        let histogram = Histogram(label: "latency_seconds", dimensions: [("app", "chat")], registry: registry)
        for value in [0.005, 0.01, 0.02, 0.05, 0.5, 3.0] { histogram.record(value) }

        #expect(histogram.count == 6)
        #expect(abs(histogram.sum - 3.585) < 1e-9)
        let text = registry.render()
        #expect(text.contains(#"latency_seconds_bucket{app="chat",le="0.01"} 2"#))
        #expect(text.contains(#"latency_seconds_bucket{app="chat",le="0.1"} 4"#))
        #expect(text.contains(#"latency_seconds_bucket{app="chat",le="1"} 5"#))
        #expect(text.contains(#"latency_seconds_bucket{app="chat",le="+Inf"} 6"#))
        #expect(text.contains(#"latency_seconds_count{app="chat"} 6"#))
        #expect(text.contains(#"latency_seconds_sum{app="chat"} 3.585"#))
    }

    @Test func gaugesGoUpAndDown() {
        let registry = MetricsRegistry()
        let gauge = Gauge(label: "queue_depth", registry: registry)
        gauge.add(5)
        gauge.add(-2)
        #expect(gauge.value == 3)
        gauge.set(0.25)
        #expect(registry.render().contains("queue_depth 0.25\n"))
    }

    @Test func labelValuesAndHelpAreEscaped() {
        let registry = MetricsRegistry()
        registry.describe("odd_total", .counter, help: "A \\ backslash\nand a line feed.")
        Counter(label: "odd_total", dimensions: [("value", "quote \" slash \\ newline \n end")], registry: registry).increment()
        let text = registry.render()
        #expect(text.contains(#"# HELP odd_total A \\ backslash\nand a line feed."#))
        #expect(text.contains(#"odd_total{value="quote \" slash \\ newline \n end"} 1"#))
    }

    @Test func collectorsAreSortedAmongTheFamilies() {
        let registry = MetricsRegistry()
        registry.describe("b_total", .counter, help: "B.")
        registry.register(MetricsCollector(name: "a_gauge", type: .gauge, help: "A.") {
            [MetricSample(labels: [("x", "1")], value: 1.5)]
        })
        registry.register(MetricsCollector(name: "c_gauge", type: .gauge, help: "C.") { [MetricSample(value: .infinity)] }
        )
        let names = registry.render().split(separator: "\n").filter { $0.hasPrefix("# TYPE") }
        #expect(names == ["# TYPE a_gauge gauge", "# TYPE b_total counter", "# TYPE c_gauge gauge"])
        #expect(registry.render().contains("a_gauge{x=\"1\"} 1.5\n"))
        #expect(registry.render().contains("c_gauge +Inf\n"))
    }

    @Test func valuesAreWrittenAsPrometheusReadsThem() {
        #expect(PrometheusText.format(3) == "3")
        #expect(PrometheusText.format(0.001) == "0.001")
        #expect(PrometheusText.format(-.infinity) == "-Inf")
        #expect(PrometheusText.format(.nan) == "NaN")
        #expect(PrometheusText.format(1e20) == "1e+20")
    }

    @Test func namesAreValidated() {
        #expect(MetricsRegistry.isValidMetricName("apns_bridge:x_total"))
        #expect(!MetricsRegistry.isValidMetricName("9lives"))
        #expect(!MetricsRegistry.isValidMetricName("a-b"))
        #expect(MetricsRegistry.isValidLabelName("app"))
        #expect(!MetricsRegistry.isValidLabelName("__name__"))
        #expect(!MetricsRegistry.isValidLabelName("a:b"))
    }

    /// Increments from many threads at once lose nothing (the counter is one atomic).
    @Test func concurrentUpdatesAreAllCounted() async {
        let registry = MetricsRegistry()
        let counter = Counter(label: "hits_total", registry: registry)
        let histogram = Histogram(label: "work_seconds", registry: registry)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<10_000 {
                        counter.increment()
                        histogram.record(0.5)
                    }
                }
            }
        }
        #expect(counter.value == 80_000)
        #expect(histogram.count == 80_000)
        #expect(histogram.sum == 40_000)
    }

    @Test func counterTableCellsAreMadeOnceAndOnlyWhenUsed() async {
        let registry = MetricsRegistry()
        final class MadeCount: Sendable { let value = Atomic<Int>(0) }
        let made = MadeCount()
        let table = CounterTable(count: 4) { index in
            made.value.add(1, ordering: .relaxed)
            return Counter(label: "answers_total", dimensions: [("cell", "\(index)")], registry: registry)
        }
        // Eight threads race for the first use of the same cell, half through the counter and half
        // through `increment(at:)`: every increment lands in one series.
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<8 {
                group.addTask {
                    for _ in 0..<1_000 {
                        if thread % 2 == 0 { table.counter(at: 2).increment() } else { table.increment(at: 2) }
                    }
                }
            }
        }
        #expect(table.counter(at: 2).value == 8_000)
        table.increment(at: 3, by: 5)  // a first use through `increment(at:)` alone
        #expect(table.counter(at: 3).value == 5)
        #expect(made.value.load(ordering: .relaxed) >= 1)  // a losing thread's spare counter is made, then dropped
        #expect(registry.render().contains("answers_total{cell=\"2\"} 8000"))
        #expect(registry.render().contains("answers_total{cell=\"3\"} 5"))
        #expect(!registry.render().contains("cell=\"0\""))  // unused cells have no series
    }
}

@Suite struct ProcessMetricsTests {
    @Test func processFamiliesComeFromProc() throws {
        let registry = MetricsRegistry()
        ProcessMetrics.register(on: registry)
        let text = registry.render()
        func value(_ name: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        #expect(try #require(value("process_cpu_seconds_total")) > 0)
        #expect(try #require(value("process_resident_memory_bytes")) > 1_000_000)
        #expect(try #require(value("process_virtual_memory_bytes")) > 1_000_000)
        #expect(try #require(value("process_max_fds")) > 0)
        let start = try #require(value("process_start_time_seconds"))
        #expect(abs(start - Date().timeIntervalSince1970) < 24 * 3600)

        // Other tests run in parallel and open and close descriptors of their own: 256 more of
        // ours must show, give or take what they do meanwhile.
        let before = try #require(value("process_open_fds"))
        let descriptors = (0..<256).map { _ in open("/dev/null", O_RDONLY) }
        defer { for descriptor in descriptors { close(descriptor) } }
        #expect(descriptors.allSatisfy { $0 >= 0 })
        let after = try #require(registry.render().split(separator: "\n").first { $0.hasPrefix("process_open_fds ") }
            .flatMap { Double($0.split(separator: " ")[1]) })
        #expect((before + 200...before + 312).contains(after), "open descriptors \(before) → \(after)")
    }

    @Test func statFieldsAreCountedFromTheLastParenthesis() throws {
        let line = "1234 (a (weird) name) S " + (4...52).map(String.init).joined(separator: " ")
        let stat = try #require(ProcStat.parse(line))
        #expect(stat.userTicks == 14)
        #expect(stat.systemTicks == 15)
        #expect(stat.startTicks == 22)
        #expect(stat.virtualBytes == 23)
        #expect(stat.residentPages == 24)
    }
}
