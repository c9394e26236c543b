// swift-tools-version:6.2
import PackageDescription

/// apns-bridge: Kafka → APNs over HTTP/2 → Kafka results.
///
/// C libraries come from Debian (`scripts/setup` installs them) and enter Swift only through the
/// four `systemLibrary` targets below. Only `Kafka`, `HTTP2`, `APNs`, `APNsSimulator` and `YAML` import them;
/// `JSON` (the strict request and answer parser), `Metrics` (the Prometheus registry) and
/// `Bridge` are plain Swift.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "apns-bridge",
    products: [
        .executable(name: "apns-bridge", targets: ["apns-bridge"]),
    ],
    targets: [
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),

        .target(name: "Observability", swiftSettings: strictSettings),
        .target(name: "Metrics", dependencies: ["Observability"], swiftSettings: strictSettings),
        .target(name: "Kafka", dependencies: ["CRdKafka", "Observability"], swiftSettings: strictSettings),
        .target(name: "HTTP2", dependencies: ["CNGHTTP2", "COpenSSL", "Observability"], swiftSettings: strictSettings),
        .target(name: "JSON", dependencies: ["Observability"], swiftSettings: strictSettings),
        .target(name: "APNs", dependencies: ["HTTP2", "COpenSSL", "JSON", "Observability"], swiftSettings: strictSettings),
        // The APNs double (tests, demo, bench, `apns-bridge simulator`): HTTP/2 server, Apple's rules,
        // fault injection, throw-away credentials. Kept out of the client modules.
        .target(
            name: "APNsSimulator",
            dependencies: ["APNs", "HTTP2", "CNGHTTP2", "COpenSSL", "JSON", "Observability"],
            swiftSettings: strictSettings
        ),
        .target(name: "YAML", dependencies: ["CYAML"], swiftSettings: strictSettings),
        .target(
            name: "Bridge",
            dependencies: ["Kafka", "HTTP2", "APNs", "JSON", "YAML", "Observability", "Metrics"],
            swiftSettings: strictSettings
        ),
        // The local environment (mock Kafka cluster + simulator), the demo and the benchmarks: used by
        // the executable's `demo` and `bench` commands and by the tests, never by the service itself.
        .target(
            name: "BridgeLocal",
            dependencies: ["Bridge", "Kafka", "HTTP2", "APNs", "APNsSimulator", "JSON", "Observability"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "apns-bridge",
            dependencies: ["Bridge", "BridgeLocal", "APNs", "APNsSimulator", "Kafka", "HTTP2", "JSON", "Observability", "Metrics"],
            swiftSettings: strictSettings
        ),

        // Shared test helpers (waiting for a condition, scratch directories, a hostile HTTP/2
        // peer written frame by frame on OpenSSL), used by every suite.
        .target(name: "TestSupport", dependencies: ["COpenSSL", "HTTP2", "Observability"], path: "Tests/TestSupport",
                swiftSettings: strictSettings),

        .testTarget(name: "ObservabilityTests", dependencies: ["TestSupport", "Observability"], swiftSettings: strictSettings),
        .testTarget(name: "MetricsTests", dependencies: ["TestSupport", "Metrics"], swiftSettings: strictSettings),
        .testTarget(name: "KafkaTests", dependencies: ["TestSupport", "Kafka"], swiftSettings: strictSettings),
        .testTarget(name: "JSONTests", dependencies: ["TestSupport", "JSON"], swiftSettings: strictSettings),
        .testTarget(name: "HTTP2Tests", dependencies: ["TestSupport", "HTTP2", "APNsSimulator"], swiftSettings: strictSettings),
        .testTarget(name: "APNsTests", dependencies: ["TestSupport", "APNs", "APNsSimulator", "HTTP2", "JSON"], swiftSettings: strictSettings),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: ["TestSupport", "APNsSimulator", "APNs", "HTTP2", "JSON", "Observability", "Metrics"],
            swiftSettings: strictSettings
        ),
        .testTarget(name: "BridgeTests", dependencies: ["TestSupport", "Bridge", "BridgeLocal", "YAML", "Kafka", "APNs", "APNsSimulator", "Metrics"], swiftSettings: strictSettings),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["TestSupport", "Bridge", "BridgeLocal", "Kafka", "APNs", "APNsSimulator", "HTTP2", "JSON", "Observability", "Metrics"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets (fuzz/targets, docs/FUZZING.md): only declared when APNS_BRIDGE_FUZZ is set,
// as `make fuzz` does, because they build only with `-sanitize=fuzzer` (libFuzzer supplies
// `main`). Ordinary `swift build` and `swift test` never see them.
if Context.environment["APNS_BRIDGE_FUZZ"] != nil {
    let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
        ("fuzz-json", ["JSON"]),
        ("fuzz-push-request", ["Bridge", "APNs", "HTTP2", "JSON"]),
        ("fuzz-configuration", ["Bridge"]),
        ("fuzz-http2-response", ["HTTP2", "APNs"]),
    ]
    package.targets.append(.systemLibrary(name: "CLibFuzzer", path: "fuzz/CLibFuzzer"))
    package.targets.append(.target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], path: "fuzz/targets/FuzzSupport",
                                   swiftSettings: strictSettings))
    for target in fuzzTargets {
        package.targets.append(.executableTarget(
            name: target.name, dependencies: target.dependencies + ["FuzzSupport"], path: "fuzz/targets/\(target.name)",
            swiftSettings: strictSettings
        ))
    }
}
