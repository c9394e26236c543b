/// Finds and parses one HTTP/1.1 request head at the start of a byte buffer (RFC 9112), strictly
/// enough that garbage is refused and leniently enough for every real client (bare `LF` line
/// ends are accepted, as RFC 9112 §2.2 allows).
///
/// Request bodies are not supported: a head announcing one is refused with 413.
enum HTTP1RequestParser {
    enum Outcome: Equatable {
        /// No complete head yet (and not over the size limit).
        case incomplete
        /// A complete head of `consumed` bytes.
        case request(HTTP1Request, consumed: Int)
        /// Unusable: answer `status` with `message` and close.
        case refused(status: Int, message: String)
    }

    /// Parses the head at the start of `buffer`.
    /// - Parameter maxHeadBytes: a head longer than this is refused with 431.
    static func parse(_ buffer: ArraySlice<UInt8>, maxHeadBytes: Int) -> Outcome {
        guard let end = headEnd(buffer) else {
            return buffer.count > maxHeadBytes
                ? .refused(status: 431, message: "request head larger than \(maxHeadBytes) bytes")
                : .incomplete
        }
        let headLength = end.headLength
        guard headLength <= maxHeadBytes else {
            return .refused(status: 431, message: "request head larger than \(maxHeadBytes) bytes")
        }
        let head = buffer[buffer.startIndex..<(buffer.startIndex + headLength)]
        guard head.allSatisfy({ $0 == 9 || $0 == 10 || $0 == 13 || (32...126).contains($0) }) else {
            return .refused(status: 400, message: "request head is not printable ASCII")
        }
        // Split on bytes: as Swift characters, "\r\n" is one grapheme and never equals "\n".
        var lines = head.split(separator: 10, omittingEmptySubsequences: false).map { line in
            Substring(String(decoding: line.last == 13 ? line.dropLast() : line, as: UTF8.self))
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let requestLine = lines.first else { return .refused(status: 400, message: "empty request line") }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, isToken(parts[0]), parts[1].first == "/" || parts[1] == "*" else {
            return .refused(status: 400, message: "malformed request line")
        }
        let version = String(parts[2])
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return version.hasPrefix("HTTP/")
                ? .refused(status: 505, message: "only HTTP/1.0 and HTTP/1.1 are served")
                : .refused(status: 400, message: "malformed request line")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), isToken(line[line.startIndex..<colon]) else {
                return .refused(status: 400, message: "malformed header field")
            }
            let name = line[line.startIndex..<colon].lowercased()
            headers.append((name: name, value: String(line[line.index(after: colon)...].trimmingSpaces())))
        }
        let target = parts[1]
        let question = target.firstIndex(of: "?")
        let request = HTTP1Request(
            method: String(parts[0]),
            path: String(target[target.startIndex..<(question ?? target.endIndex)]),
            query: question.map { String(target[target.index(after: $0)...]) },
            version: version,
            headers: headers
        )
        if request.header("transfer-encoding") != nil
            || request.headers.contains(where: { $0.name == "content-length" && $0.value != "0" }) {
            return .refused(status: 413, message: "request bodies are not accepted")
        }
        if version == "HTTP/1.1", request.header("host") == nil {
            return .refused(status: 400, message: "missing Host header")
        }
        return .request(request, consumed: end.consumed)
    }

    /// The end of the head: the blank line (`CRLF CRLF` or `LF LF`, mixed allowed). `headLength`
    /// excludes the final line end, `consumed` includes it.
    private static func headEnd(_ buffer: ArraySlice<UInt8>) -> (headLength: Int, consumed: Int)? {
        var index = buffer.startIndex
        var lineStart = index
        while index < buffer.endIndex {
            if buffer[index] == 10 {
                let lineLength = index - lineStart
                let isBlank = lineLength == 0 || (lineLength == 1 && buffer[lineStart] == 13)
                if isBlank && lineStart > buffer.startIndex {
                    return (lineStart - buffer.startIndex, index + 1 - buffer.startIndex)
                }
                lineStart = index + 1
            }
            index += 1
        }
        return nil
    }

    /// RFC 9110 `token`: visible ASCII except delimiters.
    private static func isToken(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            (33...126).contains(byte) && !"\"(),/:;<=>?@[\\]{}".utf8.contains(byte)
        }
    }
}
