import COpenSSL

/// An OpenSSL server `SSL_CTX`: TLS 1.2+, ALPN selects "h2" only (other clients get a fatal
/// alert), optional client-certificate verification.
///
/// Thread ownership: immutable after `init`, shared by connections on any loop.
public final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Builds the context from PEM files.
    ///
    /// - Parameter clientCAFile: when given, clients must present a certificate issued by one
    ///   of these CAs.
    /// - Throws: ``HTTP2Error`` with code `.tlsConfiguration` if a file cannot be loaded.
    public init(certificateFile: String, privateKeyFile: String, clientCAFile: String? = nil) throws {
        let context = try TLSCredentials.newContext(TLS_server_method())
        self.context = context
        try TLSCredentials.usePEM(context: context, certificateFile: certificateFile,
                                  privateKeyFile: privateKeyFile, passphrase: nil)
        SSL_CTX_set_alpn_select_cb(context, tlsSelectALPN, nil)
        if let clientCAFile {
            let names = try TLSCredentials.clientCANames(file: clientCAFile)
            SSL_CTX_set_client_CA_list(context, names)  // takes ownership
            guard SSL_CTX_load_verify_locations(context, clientCAFile, nil) == 1 else {
                throw HTTP2Error.openSSL(.tlsConfiguration, "cannot load client CA file \(clientCAFile)")
            }
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A server `SSL*` for one accepted connection. The caller owns the result.
    package func makeSSL() throws -> OpaquePointer {
        guard let ssl = SSL_new(context) else { throw HTTP2Error.openSSL(.tlsConfiguration, "SSL_new failed") }
        SSL_set_accept_state(ssl)
        return ssl
    }
}

/// The server's ALPN select callback: picks "h2" from the client's list, or fails the handshake.
package func tlsSelectALPN(_ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
                   _ outLength: UnsafeMutablePointer<UInt8>?, _ input: UnsafePointer<UInt8>?,
                   _ inputLength: UInt32, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let out, let outLength, let input else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    var index = 0
    let count = Int(inputLength)
    while index < count {
        let length = Int(input[index])
        if length == 2 && index + 2 < count && input[index + 1] == UInt8(ascii: "h") && input[index + 2] == UInt8(ascii: "2") {
            out.pointee = input + index + 1
            outLength.pointee = 2
            return SSL_TLSEXT_ERR_OK
        }
        index += 1 + length
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}
