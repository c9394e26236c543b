import Bridge
import Foundation
import Testing
import TestSupport

/// The compose stack's sample producer (deploy/compose/produce-samples.sh) writes what the
/// bridge of the stack (deploy/compose/bridge.yaml) reads: checked with the bridge's own decoder,
/// with kafka-console-producer.sh replaced by `cat`.
@Suite struct ComposeSampleProducerTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test func theSampleRequestsDecodeAsTheStackExpects() throws {
        let fakeKafka = try ScratchDirectory(prefix: "apns-bridge-fake-kafka")
        defer { fakeKafka.remove() }
        try FileManager.default.createDirectory(atPath: fakeKafka.file("bin"), withIntermediateDirectories: true)
        try "#!/bin/sh\nexec cat\n".write(toFile: fakeKafka.file("bin/kafka-console-producer.sh"), atomically: false, encoding: .utf8)
        chmod(fakeKafka.file("bin/kafka-console-producer.sh"), 0o755)

        let script = try CapturedProcess(URL(fileURLWithPath: "/bin/bash"), [Self.root + "/deploy/compose/produce-samples.sh"], environment: [
            "KAFKA_HOME": fakeKafka.path, "SAMPLE_COUNT": "200", "SAMPLE_RATE": "100000",
        ])
        #expect(BridgeBinary.wait(script.process, seconds: 30) == 0, "\(script.errorOutput)")
        let lines = script.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == 200)

        let configuration = try BridgeConfiguration.load(path: Self.root + "/deploy/compose/bridge.yaml", environment: [:])
        let decoder = PushRequestDecoder(configuration: configuration)
        var deadLetters: [String] = []
        var tokens: [String] = []
        var invalidTokens: [String] = []
        for (index, line) in lines.enumerated() {
            let parts = line.split(separator: "\t", maxSplits: 1)
            #expect(parts.count == 2 && parts[0] == "sample-\(index)", "key\\tvalue expected: \(line)")
            let source = RecordSource(topic: "apns.requests", partition: 0, offset: Int64(index))
            switch decoder.decode(value: Array((parts.last ?? "").utf8), source: source) {
            case .request(let request):
                #expect(request.id == "sample-\(index)" && request.app == "demo")
                tokens += request.validTokens
                invalidTokens += request.invalidTokens
            case .deadLetter(let deadLetter):
                deadLetters.append(deadLetter.code.rawValue)
            }
        }
        #expect(deadLetters == ["invalid_json", "invalid_json"])  // every 100th record is broken on purpose
        #expect(invalidTokens.count == 8 && Set(invalidTokens) == ["not-a-token"])
        // The token the stack's simulator reports as unregistered (docker-compose.yml) is among them.
        let compose = try String(contentsOfFile: Self.root + "/docker-compose.yml", encoding: .utf8)
        let unregistered = String(repeating: "5ca1ab1e", count: 8)
        #expect(compose.contains("--unregistered\n      - \(unregistered):"))
        #expect(tokens.contains(unregistered))
    }
}
