import APNs
import Bridge
import FuzzSupport
import HTTP2
import JSON

/// Arbitrary record values through the request decoder (one app and two apps, a small token
/// limit), which must answer as its general path alone does, then through what follows a
/// decoding: a dead letter is encoded as its record, whole and cut to fit 512 bytes, which must
/// be valid JSON and fit; a request's payload must be a JSON object and each of its
/// notifications must build an HTTP/2 request.
@main
enum PushRequestFuzzer {
    static let chat = RegisteredApp(name: "chat", bundleID: "com.example.chat", environment: .production)
    static let legacy = RegisteredApp(name: "legacy", bundleID: "com.example.legacy", environment: .sandbox)
    static let decoders = [
        PushRequestDecoder(apps: [chat], maxTokensPerRequest: 4),
        PushRequestDecoder(apps: [chat, legacy], maxTokensPerRequest: 4),
    ]
    static let source = RecordSource(topic: "apns.requests", partition: 0, offset: 42)

    static func main() {
        runFuzzer { bytes in
            for decoder in decoders {
                let decoding = decoder.decode(value: bytes, source: source)
                // The fast path for common requests answers as the general path does, or leaves it to it.
                precondition(decoding == decoder.decodeInGeneral(value: bytes, source: source),
                             "the decoder's fast path and general path disagree")
                switch decoding {
                case .deadLetter(let deadLetter):
                    check(deadLetter, original: bytes)
                case .request(let request):
                    check(request)
                }
            }
        }
    }

    /// The record a dead letter becomes is JSON, whole or cut to fit a small `message.max.bytes`;
    /// a cut one fits (unless even an empty original would not) and says how long the original was.
    static func check(_ deadLetter: DeadLetter, original: [UInt8]) {
        for maximumBytes in [Int.max, 512] {
            var record: [UInt8] = []
            ResultRecordEncoder.appendDeadLetter(deadLetter, source: source, original: original,
                                                 maximumBytes: maximumBytes, to: &record)
            guard let object = try? JSONScanner.parse(record).root else {
                preconditionFailure("dead letter is not JSON: \(String(decoding: record, as: UTF8.self))")
            }
            guard object["original_truncated"]?.boolValue == true else {
                precondition(record.count <= maximumBytes, "a whole dead letter of \(record.count) bytes exceeds \(maximumBytes)")
                continue
            }
            precondition(object["original_size"]?.int64Value == Int64(original.count), "original_size is wrong")
            precondition(record.count <= maximumBytes || object["original"]?.stringValue == "",
                         "a cut dead letter of \(record.count) bytes exceeds \(maximumBytes)")
        }
    }

    static func check(_ request: PushRequest) {
        precondition((try? JSONScanner.parse(request.payload))?.root.kind == .object, "payload is not a JSON object")
        precondition(!request.validTokens.isEmpty || !request.invalidTokens.isEmpty, "a request without tokens")
        for token in request.validTokens {
            let notification = APNsNotification(
                token: token, pushType: request.pushType, priority: request.priority, expiration: request.expiration,
                collapseID: request.collapseID, topic: request.topic, apnsID: request.apnsID, payload: request.payload
            )
            let http2 = notification.makeRequest(authorization: "bearer fuzz")
            precondition(http2.body == request.payload, "the request body is not the payload")
        }
    }
}
