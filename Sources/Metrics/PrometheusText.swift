import Synchronization

/// Writing the Prometheus text exposition format, version 0.0.4.
///
/// <https://prometheus.io/docs/instrumenting/exposition_formats/>: `# HELP` and `# TYPE` once per
/// family, one line per sample, label values escaped (`\\`, `\"`, `\n`), help escaped (`\\`,
/// `\n`), histograms as cumulative `_bucket{le=…}` lines ending with `+Inf`, then `_sum` and
/// `_count`.
public enum PrometheusText {
    /// The `Content-Type` of the format.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func append(family: MetricsRegistry.Family, to output: inout String) {
        appendHeader(name: family.name, type: family.type, help: family.help, to: &output)
        for series in family.series {
            switch series.storage {
            case .counter(let counter):
                appendSample(family.name, labels: series.labels, value: String(counter.value.load(ordering: .relaxed)), to: &output)
            case .gauge(let gauge):
                appendSample(family.name, labels: series.labels, value: format(gauge.value), to: &output)
            case .histogram(let histogram):
                appendHistogram(family.name, labels: series.labels, storage: histogram, to: &output)
            }
        }
    }

    static func append(collector: MetricsCollector, samples: [MetricSample], to output: inout String) {
        appendHeader(name: collector.name, type: collector.type, help: collector.help, to: &output)
        for sample in samples {
            appendSample(collector.name, labels: labels(sample.labels), value: format(sample.value), to: &output)
        }
    }

    private static func appendHeader(name: String, type: MetricType, help: String, to output: inout String) {
        if !help.isEmpty {
            output += "# HELP \(name) \(escapeHelp(help))\n"
        }
        output += "# TYPE \(name) \(type.rawValue)\n"
    }

    private static func appendHistogram(_ name: String, labels: String, storage: HistogramStorage, to output: inout String) {
        let (cumulative, sum) = storage.snapshot()
        let prefix = labels.isEmpty ? "" : labels + ","
        for (index, bound) in storage.upperBounds.enumerated() {
            output += "\(name)_bucket{\(prefix)le=\"\(format(bound))\"} \(cumulative[index])\n"
        }
        let total = cumulative.last ?? 0
        output += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(total)\n"
        appendSample(name + "_sum", labels: labels, value: format(sum), to: &output)
        appendSample(name + "_count", labels: labels, value: String(total), to: &output)
    }

    private static func appendSample(_ name: String, labels: String, value: String, to output: inout String) {
        output += name
        if !labels.isEmpty {
            output += "{"
            output += labels
            output += "}"
        }
        output += " "
        output += value
        output += "\n"
    }

    /// `a="x",b="y"` with every value escaped.
    static func labels(_ dimensions: [(String, String)]) -> String {
        var text = ""
        for (index, (name, value)) in dimensions.enumerated() {
            if index > 0 { text += "," }
            text += name
            text += "=\""
            text += escapeLabelValue(value)
            text += "\""
        }
        return text
    }

    /// A label value with `\`, `"` and line feeds escaped.
    static func escapeLabelValue(_ value: String) -> String {
        escape(value, quotes: true)
    }

    /// Help text with `\` and line feeds escaped.
    static func escapeHelp(_ help: String) -> String {
        escape(help, quotes: false)
    }

    private static func escape(_ text: String, quotes: Bool) -> String {
        let needsEscaping = text.utf8.contains { byte in
            byte == UInt8(ascii: "\\") || byte == 10 || (quotes && byte == UInt8(ascii: "\""))
        }
        guard needsEscaping else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\"" where quotes: escaped += "\\\""
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// A sample value: integers without a fraction, `+Inf`, `-Inf`, `NaN`, else Swift's shortest
    /// round-tripping form (which Prometheus' parser reads).
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 { return String(Int64(value)) }
        return String(value)
    }
}
