/// One record for an output topic (result, invalid token or dead letter), encoded and ready to
/// produce: what exactly-once mode holds back until its input record's turn comes.
struct OutputRecord: Sendable {
    var topic: String
    var key: [UInt8]?
    var value: [UInt8]
    var headers: [(name: String, value: [UInt8])]
}
