import Bridge
import JSON
import Observability

/// `apns-bridge send`: one notification through the real APNs path, without Kafka.
enum SendCommand {
    static let help = """
    Usage: apns-bridge send [--config FILE] --token HEX [--token HEX …] --payload JSON
                            [--app NAME] [--push-type TYPE] [--priority 10|5|1] [--topic TOPIC]
                            [--environment production|sandbox] [--expiration UNIX] [--collapse-id ID]
                            [--apns-id UUID] [--timeout SECONDS]

    Builds a push request (contract §2) from the options, validates it exactly as the bridge does,
    sends it with the configured app's credentials and prints one result (contract §3) per token as
    JSON lines. Exit 0 when every token was delivered, 1 otherwise, 2 on a usage or configuration error.

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        let options = try CommandLineOptions(arguments, accepting: .init(valued: [
            "config", "token", "payload", "app", "push-type", "priority", "topic", "environment",
            "expiration", "collapse-id", "apns-id", "timeout",
        ]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        let tokens = options.values("token")
        guard !tokens.isEmpty else { throw CommandLineOptions.UsageError(description: "--token is required") }
        let payload = try options.required("payload")
        // One JSON value on its own, checked before it is placed in the request: spliced
        // unchecked, text such as `{},"id":"x"` would add fields of its own, and an error's
        // position would point into the assembled request instead of the payload.
        do {
            _ = try JSONScanner.parse(Array(payload.utf8))
        } catch {
            throw CommandLineOptions.UsageError(description: "--payload is not one JSON value: \(error)")
        }
        let configuration = try CommandLineInterface.loadConfiguration(options)
        let timeout = try options.integer("timeout", default: 30, in: 1...3600)

        var json = "{\"tokens\":["
        json += tokens.map { quoted($0) }.joined(separator: ",")
        json += "],\"payload\":" + payload
        for (option, field) in [("app", "app"), ("push-type", "push_type"), ("topic", "topic"),
                                ("environment", "environment"), ("collapse-id", "collapse_id"), ("apns-id", "apns_id")] {
            if let value = options.value(option) { json += ",\"\(field)\":" + quoted(value) }
        }
        for (option, field) in [("priority", "priority"), ("expiration", "expiration")] {
            if let value = options.value(option) {
                // The number as read, not the text given: `+5` and `0999` are not JSON numbers.
                guard let number = Int64(value) else {
                    throw CommandLineOptions.UsageError(description: "--\(option) must be a whole number, got '\(value)'")
                }
                json += ",\"\(field)\":" + String(number)
            }
        }
        json += "}"

        switch try OneShotSender.send(requestJSON: Array(json.utf8), configuration: configuration, timeoutSeconds: timeout) {
        case .failure(let deadLetter):
            CommandLineInterface.write("apns-bridge send: \(deadLetter.code.rawValue): \(deadLetter.detail)\n", to: 2)
            return 2
        case .success(let results):
            var output: [UInt8] = []
            for result in results {
                ResultRecordEncoder.appendResult(result, to: &output)
                output.append(UInt8(ascii: "\n"))
            }
            CommandLineInterface.write(String(decoding: output, as: UTF8.self), to: 1)
            let expected = Set(tokens.map { $0.lowercased() }).count
            return results.count == expected && results.allSatisfy({ $0.outcome == .delivered }) ? 0 : 1
        }
    }

    private static func quoted(_ text: String) -> String {
        var output = ""
        JSONText.appendQuoted(text, to: &output)
        return output
    }
}
