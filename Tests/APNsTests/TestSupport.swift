#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
@_exported import TestSupport
import Foundation
import HTTP2
import Synchronization
@testable import APNs

/// Generates a non-P-256 private key PEM with OpenSSL (`ED25519`, or `EC` on another curve).
func generateOtherKeyPEM(algorithm: String, curve: String? = nil) -> String? {
    guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else { return nil }
    defer { EVP_PKEY_CTX_free(context) }
    guard EVP_PKEY_keygen_init(context) == 1 else { return nil }
    if let curve, EVP_PKEY_CTX_set_group_name(context, curve) != 1 { return nil }
    var key: OpaquePointer?
    guard EVP_PKEY_generate(context, &key) == 1, let key else { return nil }
    defer { EVP_PKEY_free(key) }
    guard let bio = BIO_new(BIO_s_mem()) else { return nil }
    defer { BIO_free(bio) }
    guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else { return nil }
    var data: UnsafeMutablePointer<CChar>?
    let length = apns_bio_get_mem_data(bio, &data)
    guard length > 0, let data else { return nil }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self)
}

/// Verifies an ES256 JWS signature with OpenSSL directly, independently of `JWTVerifier`:
/// r‖s → DER with the Swift encoder, then `EVP_DigestVerify` with a public key read from PEM.
func opensslVerifies(jwt: String, publicKeyPEM: String) -> Bool {
    let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let raw = Base64URL.decode(parts[2]),
          let der = ECDSASignatureFormat.derSignature(fromRaw: raw) else { return false }
    let message = Array((parts[0] + "." + parts[1]).utf8)
    var pemBytes = Array(publicKeyPEM.utf8)
    return pemBytes.withUnsafeMutableBytes { buffer -> Bool in
        guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return false }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PUBKEY(bio, nil, nil, nil) else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let ok = EVP_DigestVerify(context, der, der.count, message, message.count) == 1
        ERR_clear_error()
        return ok
    }
}

/// A unique scratch directory under the temporary directory, removed by `remove()`.
struct ScratchDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "apns-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

let sampleToken = String(repeating: "ab", count: 32)
let sampleTopic = "com.example.chat"

/// Listens on a loopback port and closes every connection as soon as it is accepted, counting
/// them: an APNs endpoint that is down (each connect fails before TLS), whose failed connects a
/// test can wait for. It listens on a `PortReservation`'s port, so once it is closed a simulator
/// can take the port over. Call `close()` when done.
final class ClosingListener: Sendable {
    private let descriptor: Int32
    private let accepted = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(port: Int) throws {
        descriptor = try SocketAddress.resolve(host: "127.0.0.1", port: port, passive: true)[0].listen(backlog: 64)
        let thread = Thread { [self] in
            defer { finished.signal() }
            while !stopped.load(ordering: .relaxed) {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 10) > 0 else { continue }
                let connection = accept(descriptor, nil, nil)
                guard connection >= 0 else { continue }
                Glibc.close(connection)
                accepted.add(1, ordering: .relaxed)
            }
        }
        thread.start()
    }

    /// Connections accepted (and closed) so far.
    var acceptedCount: Int { accepted.load(ordering: .relaxed) }

    /// Stops accepting and closes the listening socket.
    func close() {
        stopped.store(true, ordering: .relaxed)
        finished.wait()
        Glibc.close(descriptor)
    }
}
