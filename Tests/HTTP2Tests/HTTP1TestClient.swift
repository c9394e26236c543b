#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A blocking TCP client for HTTP/1.1 tests (receive timeout 10 s): sends raw bytes and reads
/// answers as the server wrote them.
final class HTTP1TestClient {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    let fd: Int32
    private var buffered: [UInt8] = []

    init(port: Int) throws {
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
    func send(_ text: String) {
        send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            offset += count
        }
    }

    /// Reads one answer (status line, headers, `Content-Length` bytes of body unless `head`).
    /// Nil when the connection ends first.
    func readResponse(head: Bool = false) -> Response? {
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
        let length = head ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        while buffered.count < length {
            guard fill() else { return nil }
        }
        let body = String(decoding: buffered[0..<length], as: UTF8.self)
        buffered.removeFirst(length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Whether the server closed the connection (read returns end of stream or a reset) before
    /// the receive timeout, discarding anything it still sends.
    func waitForClose() -> Bool {
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
