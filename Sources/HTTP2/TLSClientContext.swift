#if canImport(Glibc)
import Glibc
#endif
import COpenSSL

/// TLS settings of an HTTP/2 client. Peer verification is always on. Descriptions and
/// reflection never show the passphrase.
public struct TLSClientConfiguration: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// An extra PEM file of trusted CA certificates, added to the system roots.
    public var caFile: String?
    /// A PEM client certificate (chain) file, for certificate-based authentication.
    public var certificateFile: String?
    /// The PEM private key of `certificateFile`.
    public var privateKeyFile: String?
    /// The passphrase of an encrypted `privateKeyFile` or of `pkcs12File`.
    public var privateKeyPassphrase: String?
    /// A PKCS#12 file with the client certificate and key (instead of the PEM pair).
    public var pkcs12File: String?

    /// Creates a configuration; every field is optional.
    public init(caFile: String? = nil, certificateFile: String? = nil, privateKeyFile: String? = nil,
                privateKeyPassphrase: String? = nil, pkcs12File: String? = nil) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
        self.privateKeyPassphrase = privateKeyPassphrase
        self.pkcs12File = pkcs12File
    }

    /// The files, and whether there is a passphrase (`<redacted>`) or not (`none`).
    public var description: String {
        let files = [("caFile", caFile), ("certificateFile", certificateFile), ("privateKeyFile", privateKeyFile),
                     ("pkcs12File", pkcs12File)].map { name, file in "\(name): \(file ?? "none")" }
        return "TLSClientConfiguration(\(files.joined(separator: ", ")), privateKeyPassphrase: \(redactedPassphrase))"
    }

    /// Same as ``description``: no passphrase.
    public var debugDescription: String { description }

    /// A mirror with the passphrase as `<redacted>` (so `dump` cannot print it).
    public var customMirror: Mirror {
        Mirror(self, children: ["caFile": caFile as Any, "certificateFile": certificateFile as Any,
                                "privateKeyFile": privateKeyFile as Any, "privateKeyPassphrase": redactedPassphrase,
                                "pkcs12File": pkcs12File as Any],
               displayStyle: .struct)
    }

    private var redactedPassphrase: String { privateKeyPassphrase == nil ? "none" : "<redacted>" }
}

/// An OpenSSL client `SSL_CTX`: TLS 1.2+, ALPN "h2", peer verification against the system roots
/// plus an optional CA file, optional client certificate.
///
/// Thread ownership: immutable after `init` and shared by connections on any loop (OpenSSL
/// contexts are thread-safe for creating `SSL` objects).
public final class TLSClientContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Builds the context.
    /// - Throws: ``HTTP2Error`` with code `.tlsConfiguration` if a file cannot be loaded.
    public init(_ configuration: TLSClientConfiguration) throws {
        let context = try TLSCredentials.newContext(TLS_client_method())
        self.context = context
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard SSL_CTX_set_default_verify_paths(context) == 1 else {
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot load the system trust store")
        }
        if let caFile = configuration.caFile {
            try TLSCredentials.checkReadable(caFile, what: "CA file")
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw HTTP2Error.openSSL(.tlsConfiguration, "cannot load CA file \(caFile)")
            }
        }
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {  // 0 = success here
            throw HTTP2Error.openSSL(.tlsConfiguration, "cannot set ALPN")
        }
        if let pkcs12File = configuration.pkcs12File {
            try TLSCredentials.usePKCS12(context: context, file: pkcs12File,
                                         passphrase: configuration.privateKeyPassphrase)
        } else if let certificateFile = configuration.certificateFile {
            guard let privateKeyFile = configuration.privateKeyFile else {
                throw HTTP2Error(.tlsConfiguration, "certificateFile needs privateKeyFile")
            }
            try TLSCredentials.usePEM(context: context, certificateFile: certificateFile,
                                      privateKeyFile: privateKeyFile, passphrase: configuration.privateKeyPassphrase)
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A client `SSL*` for one connection to `host`: SNI (names only) and host-name or IP
    /// verification. The caller owns the result.
    func makeSSL(host: String) throws -> OpaquePointer {
        guard let ssl = SSL_new(context) else { throw HTTP2Error.openSSL(.tlsConfiguration, "SSL_new failed") }
        SSL_set_connect_state(ssl)
        if SocketAddress.isIPLiteral(host) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 else {
                SSL_free(ssl)
                throw HTTP2Error.openSSL(.tlsConfiguration, "cannot set the expected IP address")
            }
        } else {
            SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            guard SSL_set1_host(ssl, host) == 1, apns_ssl_set_tlsext_host_name(ssl, host) == 1 else {
                SSL_free(ssl)
                throw HTTP2Error.openSSL(.tlsConfiguration, "cannot set the expected host name")
            }
        }
        return ssl
    }
}
