import Bridge
import BridgeLocal
import Metrics
import TestSupport
import Foundation
import Testing

/// The shipped alert rules and dashboard: valid for Prometheus' own tools and Grafana, and every
/// expression names series the bridge really exports.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct DeployFilesTests {
    static let alertsFile = PrometheusTools.packageRoot + "/deploy/prometheus/alerts.yml"
    static let alertTestsFile = PrometheusTools.packageRoot + "/deploy/prometheus/alerts.test.yml"
    static let dashboardFile = PrometheusTools.packageRoot + "/deploy/grafana/apns-bridge.json"

    /// Metric families of a real pipeline's `/metrics` (HELP/TYPE lines), plus the series names
    /// histograms add.
    static func exportedNames() throws -> Set<String> {
        let environment = try LocalEnvironment(partitions: 1)
        defer { environment.close() }
        let pipeline = try BridgePipeline(configuration: try environment.configuration(groupID: "deploy-files"))
        let text = pipeline.metrics.registry.render()
        pipeline.requestStop()
        _ = pipeline.run()  // returns at once: closes the clients and stops the loops
        var names: Set<String> = ["up"]
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            let name = String(parts[2])
            names.insert(name)
            if parts[3] == "histogram" {
                names.formUnion([name + "_bucket", name + "_sum", name + "_count"])
            }
        }
        return names
    }

    /// Identifiers in a PromQL expression that look like series names of ours.
    static func referencedNames(_ expression: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: "\\b(apns_bridge_[a-z_]+|process_[a-z_]+)\\b")  // invariant: literal pattern
        let range = NSRange(expression.startIndex..., in: expression)
        return Set(pattern.matches(in: expression, range: range).compactMap { match in
            Range(match.range(at: 1), in: expression).map { String(expression[$0]) }
        })
    }

    @Test func alertRulesPassPromtoolCheckAndTheirUnitTests() throws {
        let check = try PrometheusTools.promtool(["check", "rules", Self.alertsFile])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("SUCCESS: 8 rules found"), "\(check.output)")
        let test = try PrometheusTools.promtool(["test", "rules", Self.alertTestsFile])
        #expect(test.status == 0, "\(test.output)")
        #expect(test.output.contains("SUCCESS"), "\(test.output)")
    }

    /// The unit tests are not vacuous: a rule whose threshold is changed makes them fail.
    @Test func ruleUnitTestsFailWhenARuleChanges() throws {
        let directory = try ScratchDirectory(prefix: "alerts")
        defer { directory.remove() }
        let rules = try String(contentsOfFile: Self.alertsFile, encoding: .utf8)
        let changed = rules.replacingOccurrences(of: "> 0.05", with: "> 1.5")
        #expect(changed != rules)
        try changed.write(toFile: directory.file("alerts.yml"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: Self.alertTestsFile, toPath: directory.file("alerts.test.yml"))
        let test = try PrometheusTools.promtool(["test", "rules", directory.file("alerts.test.yml")])
        #expect(test.status != 0)
        #expect(test.output.contains("ApnsBridgeFailedRatioHigh"), "\(test.output)")
    }

    @Test func alertRulesAndTheDashboardUseOnlyExportedSeries() throws {
        let exported = try Self.exportedNames()
        let rules = try String(contentsOfFile: Self.alertsFile, encoding: .utf8)
        let ruleNames = Self.referencedNames(rules)
        #expect(ruleNames.count >= 8)
        #expect(ruleNames.subtracting(exported).isEmpty, "unknown in alerts.yml: \(ruleNames.subtracting(exported).sorted())")

        let data = try Data(contentsOf: URL(fileURLWithPath: Self.dashboardFile))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(dashboard["title"] as? String == "apns-bridge")
        #expect(dashboard["uid"] as? String == "apns-bridge")
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        var expressions: [String] = []
        for panel in panels {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                expressions.append(try #require(target["expr"] as? String))
            }
        }
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        expressions += variables.compactMap { $0["definition"] as? String }
        #expect(expressions.count >= 20)
        // Imported or provisioned, the panels follow the dashboard's data source variable.
        #expect(variables.contains { $0["name"] as? String == "datasource" && $0["type"] as? String == "datasource" })
        for panel in panels where panel["type"] as? String != "row" {
            let source = panel["datasource"] as? [String: String]
            #expect(source == ["type": "prometheus", "uid": "${datasource}"], "\(panel["title"] ?? "")")
        }
        var used: Set<String> = []
        for expression in expressions {
            let names = Self.referencedNames(expression)
            #expect(!names.isEmpty, "expression names no series: \(expression)")
            #expect(names.subtracting(exported).isEmpty, "unknown in \(expression): \(names.subtracting(exported).sorted())")
            used.formUnion(names)
        }
        // What the dashboard must show.
        for name in ["apns_bridge_notifications_total", "apns_bridge_apns_request_duration_seconds_bucket",
                     "apns_bridge_in_flight", "apns_bridge_consumer_lag", "apns_bridge_connections"] {
            #expect(used.contains(name), "\(name) missing from the dashboard")
        }
        // Panels do not overlap on Grafana's 24-column grid.
        var occupied: Set<[Int]> = []
        for panel in panels {
            let grid = try #require(panel["gridPos"] as? [String: Int])
            for x in grid["x"]!..<(grid["x"]! + grid["w"]!) {
                for y in grid["y"]!..<(grid["y"]! + grid["h"]!) {
                    #expect(occupied.insert([x, y]).inserted, "panel \(panel["title"] ?? "") overlaps another")
                }
            }
            #expect(grid["x"]! + grid["w"]! <= 24)
        }
    }
}
