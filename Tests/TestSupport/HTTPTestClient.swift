#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A blocking TCP client for HTTP/1.1 tests (receive timeout 10 s) on 127.0.0.1: sends raw bytes
/// and reads answers as the server wrote them.
public final class HTTPTestClient {
    /// One answer.
    public struct Response: Sendable {
        public var status: Int
        /// Header names in lowercase.
        public var headers: [String: String]
        public var body: String
    }

    /// The socket.
    public let fd: Int32
    private var buffered: [UInt8] = []

    /// `GET path` on a fresh connection (`Connection: close`); nil when no answer came.
    public static func get(port: Int, _ path: String) -> Response? {
        guard let client = try? HTTPTestClient(port: port) else { return nil }
        client.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
        return client.readResponse()
    }

    /// Connects to 127.0.0.1:`port`.
    public init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(fd) }

    /// Writes `text` whole (or as much as the peer takes before it closes).
    public func send(_ text: String) {
        send(Array(text.utf8))
    }

    /// Writes `bytes` whole (or as much as the peer takes before it closes).
    public func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            offset += count
        }
    }

    /// Reads one answer (status line, headers, `Content-Length` bytes of body unless `head`).
    /// Nil when the connection ends first.
    public func readResponse(head: Bool = false) -> Response? {
        guard let headEnd = readUntilBlankLine() else { return nil }
        let headText = String(decoding: buffered[0..<headEnd], as: UTF8.self)
        buffered.removeFirst(headEnd + 4)
        let lines = headText.components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        if !head, headers["transfer-encoding"]?.lowercased() == "chunked" {
            guard let body = readChunkedBody() else { return nil }
            return Response(status: status, headers: headers, body: body)
        }
        let length = head ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        guard let body = readBytes(length) else { return nil }
        return Response(status: status, headers: headers, body: String(decoding: body, as: UTF8.self))
    }

    /// The first line of a response (its status line), leaving the rest unread: the server
    /// has begun to answer.
    public func readStatusLine() -> String? {
        readLine()
    }

    private func readBytes(_ count: Int) -> [UInt8]? {
        while buffered.count < count {
            guard fill() else { return nil }
        }
        defer { buffered.removeFirst(count) }
        return Array(buffered[0..<count])
    }

    private func readLine() -> String? {
        while true {
            if let end = buffered.firstIndex(of: 10) {
                defer { buffered.removeFirst(end + 1) }
                return String(decoding: buffered[0..<end], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard fill() else { return nil }
        }
    }

    /// A `Transfer-Encoding: chunked` body (as Go's HTTP server sends larger answers).
    private func readChunkedBody() -> String? {
        var body: [UInt8] = []
        while true {
            guard let sizeLine = readLine(), let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else { return nil }
            if size == 0 {
                _ = readLine()
                return String(decoding: body, as: UTF8.self)
            }
            guard let chunk = readBytes(size), readLine() != nil else { return nil }
            body += chunk
        }
    }

    /// Whether the server closed the connection (read returns end of stream or a reset) before
    /// the receive timeout, discarding anything it still sends.
    public func waitForClose() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }

    private func readUntilBlankLine() -> Int? {
        while true {
            if buffered.count >= 4 {
                for index in 0...(buffered.count - 4)
                where buffered[index] == 13 && buffered[index + 1] == 10 && buffered[index + 2] == 13 && buffered[index + 3] == 10 {
                    return index
                }
            }
            guard fill() else { return nil }
        }
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        buffered += chunk[0..<count]
        return true
    }
}
