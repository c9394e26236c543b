import Foundation
import JSON
import Kafka
import Observability

/// How long and how hard the soak runs, from the environment (`make soak`, `make soak-ci`).
struct SoakSettings: Sendable {
    /// `SOAK_SECONDS`: the time under load. Without it the soak does not run.
    let seconds: Int
    /// `SOAK_SAMPLE_SECONDS` (60): how often the bridge's process is sampled and a line printed.
    let sampleSeconds: Int
    /// `SOAK_RATE` (3000): the offered load in notifications per second, in requests of
    /// ``SoakLoad/tokensPerRequest`` tokens, as `apns-bridge bench` sends them. The default is
    /// about half of what the debug build keeps up with in this set-up on the 2-core machine of
    /// docs/BENCHMARKS.md; see docs/RELIABILITY.md.
    let rate: Int
    /// `SOAK_PRELOAD` (unset: none): a shared library the bridge runs with through `LD_PRELOAD`,
    /// e.g. `libjemalloc.so.2`, the allocator of the Docker image (`make soak` sets it). The soak
    /// then requires that the library was loaded, so that a missing one cannot pass unnoticed.
    let preload: String?

    static let fromEnvironment: SoakSettings? = {
        let environment = ProcessInfo.processInfo.environment
        guard let seconds = environment["SOAK_SECONDS"].flatMap(Int.init), seconds > 0 else { return nil }
        return SoakSettings(
            seconds: seconds,
            sampleSeconds: environment["SOAK_SAMPLE_SECONDS"].flatMap(Int.init).map { max(1, $0) } ?? 60,
            rate: environment["SOAK_RATE"].flatMap(Int.init).map { max(1, $0) } ?? 3000,
            preload: environment["SOAK_PRELOAD"].flatMap { $0.isEmpty ? nil : $0 })
    }()
}

/// The load side of the soak: produces push requests at an even rate (request `soak-N` with
/// tokens 5N+1…5N+5, as 64 hexadecimal digits) and reads the results topic as they come,
/// counting results per notification.
final class SoakLoad {
    static let tokensPerRequest = 5
    private let producer: KafkaProducer
    private let reader: KafkaConsumer
    private let topic: String
    private let produceFailures = Locked(0)
    /// Results seen per notification number (5N+k for token k of request N).
    private(set) var resultCounts: [UInt8] = []
    /// Requests produced so far.
    private(set) var produced = 0
    /// Results by outcome, and unreadable ones.
    private(set) var outcomes: [String: Int] = [:]
    private(set) var unreadable = 0
    private(set) var resultsSeen = 0
    var producerFailures: Int { produceFailures.withLock { $0 } }

    init(bootstrapServers: String, requestTopic: String, resultsTopic: String) throws {
        topic = requestTopic
        let failures = produceFailures
        producer = try KafkaProducer(
            bootstrapServers: bootstrapServers, properties: ["linger.ms": "5"], logger: Logger(label: "soak.producer"),
            deliveryHandler: { _, error in if error != nil { failures.withLock { $0 += 1 } } })
        reader = try KafkaConsumer(
            bootstrapServers: bootstrapServers, groupID: "soak-reader-\(UInt32.random(in: 0...UInt32.max))",
            topics: [resultsTopic], properties: ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500"],
            logger: Logger(label: "soak.reader"))
    }

    /// Produces the requests due by `elapsed` seconds at `rate` notifications per second (at
    /// most 1,000 requests at once).
    func produceDue(elapsedSeconds elapsed: Double, rate: Int) throws {
        let due = min(Int(elapsed * Double(rate)) / Self.tokensPerRequest, produced + 1_000)
        while produced < due {
            let number = produced
            let tokens = (1...Self.tokensPerRequest).map { #""\#(String(format: "%064x", number * Self.tokensPerRequest + $0))""# }
            let value = #"{"id":"soak-\#(number)","tokens":[\#(tokens.joined(separator: ","))],"payload":{"aps":{"alert":"soak"}}}"#
            try producer.produce(topic: topic, key: Array("soak-\(number)".utf8), value: Array(value.utf8), headers: [], tag: UInt64(number))
            resultCounts += repeatElement(0, count: Self.tokensPerRequest)
            produced += 1
        }
    }

    /// Waits for every request produced so far to be acknowledged by Kafka.
    func flush() -> Bool {
        producer.flush(timeoutMilliseconds: 60_000)
    }

    /// Reads the results that arrived within `timeoutMilliseconds`.
    /// - Returns: how many were read.
    @discardableResult
    func readResults(timeoutMilliseconds: Int32) throws -> Int {
        let messages = try reader.poll(maxMessages: 5_000, timeoutMilliseconds: timeoutMilliseconds)
        for message in messages {
            resultsSeen += 1
            guard let value = message.value, let document = try? JSONScanner.parse(value),
                  let id = document.root["request_id"]?.stringValue, id.hasPrefix("soak-"),
                  let request = Int(id.dropFirst(5)), let token = document.root["token"]?.stringValue,
                  let tokenNumber = Int(token, radix: 16), tokenNumber > request * Self.tokensPerRequest,
                  tokenNumber <= (request + 1) * Self.tokensPerRequest, tokenNumber <= resultCounts.count,
                  let outcome = document.root["outcome"]?.stringValue else {
                unreadable += 1
                continue
            }
            resultCounts[tokenNumber - 1] = resultCounts[tokenNumber - 1] &+ 1
            outcomes[outcome, default: 0] += 1
        }
        return messages.count
    }

    /// Notifications with no result so far, and with more than one.
    var missing: Int { resultCounts.lazy.filter { $0 == 0 }.count }
    var duplicated: Int { resultCounts.lazy.filter { $0 > 1 }.count }

    func close() {
        producer.close()
        reader.close()
    }
}

/// One line per sample, and the rules by which the samples are "flat".
struct SoakSample: Sendable {
    let seconds: Int
    let process: ProcessSample
    /// Results per second since the previous sample.
    let throughput: Double

    var line: String {
        String(format: "soak %5ds  rss %7.1f MB  fds %4d  threads %3d  throughput %8.1f/s",
               seconds, Double(process.residentKilobytes) / 1024, process.openDescriptors, process.threads, throughput)
    }

    /// How `last` may differ from `baseline` (the first sample, taken after a whole interval of
    /// warm-up) and still count as flat: memory within 20 % (plus 8 MB for a small process),
    /// descriptors within 8 (connections replaced after GOAWAY or a drop may overlap for a
    /// moment), threads within 2, and the throughput of every sample keeping up with at least
    /// 80 % of the offered load.
    static func flatnessProblems(samples: [SoakSample], offeredRate: Int) -> [String] {
        guard let baseline = samples.first, let last = samples.last else { return ["no samples"] }
        var problems: [String] = []
        let allowedKilobytes = baseline.process.residentKilobytes + baseline.process.residentKilobytes / 5 + 8 * 1024
        if last.process.residentKilobytes > allowedKilobytes {
            problems.append("RSS grew from \(baseline.process.residentKilobytes) kB to \(last.process.residentKilobytes) kB")
        }
        if last.process.openDescriptors > baseline.process.openDescriptors + 8 {
            problems.append("open descriptors grew from \(baseline.process.openDescriptors) to \(last.process.openDescriptors)")
        }
        if last.process.threads > baseline.process.threads + 2 {
            problems.append("threads grew from \(baseline.process.threads) to \(last.process.threads)")
        }
        for sample in samples where sample.throughput < 0.8 * Double(offeredRate) {
            problems.append("throughput \(Int(sample.throughput))/s at \(sample.seconds) s, offered \(offeredRate)/s")
        }
        return problems
    }
}
