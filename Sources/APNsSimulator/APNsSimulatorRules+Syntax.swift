import APNs
extension APNsSimulatorRules {
    /// A device token: even number of hex digits, 64 to 200 of them.
    static func isValidDeviceToken(_ token: Substring) -> Bool {
        let count = token.utf8.count
        guard count >= 64, count <= 200, count % 2 == 0 else { return false }
        return token.utf8.allSatisfy(isHexDigit)
    }

    /// A UUID in 8-4-4-4-12 hexadecimal form (either case).
    static func isValidUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard isHexDigit(byte) else { return false }
            }
        }
        return true
    }

    /// An `apns-expiration` value: a non-negative decimal integer that fits Int64.
    static func isValidExpiration(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } && Int64(text) != nil
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46)
    }

    /// `{"reason":"…"}` or, with a timestamp, `{"reason":"…","timestamp":ms}`.
    static func errorBody(_ reason: APNsReason, timestamp: Int64? = nil) -> [UInt8] {
        var body: [UInt8] = Array(#"{"reason":""#.utf8)
        body.append(contentsOf: Array(reason.rawValue.utf8))
        body.append(UInt8(ascii: "\""))
        if let timestamp {
            body.append(contentsOf: Array(#","timestamp":"#.utf8))
            body.append(contentsOf: Array(String(timestamp).utf8))
        }
        body.append(UInt8(ascii: "}"))
        return body
    }
}
