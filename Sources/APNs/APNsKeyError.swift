/// Why an APNs key could not be loaded, generated or used.
///
/// Descriptions name the file and the key type only: never key material.
public enum APNsKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key file does not exist or cannot be read; `reason` says why when known (e.g. "is a
    /// directory", "No such file or directory").
    case fileUnreadable(path: String, reason: String? = nil)
    /// A key file cannot be written (test credentials).
    case fileUnwritable(path: String)
    /// The input holds no unencrypted PEM private key (an APNs `.p8` is `BEGIN PRIVATE KEY`, PKCS#8).
    case notAPrivateKeyPEM
    /// The input holds no PEM public key (`BEGIN PUBLIC KEY`).
    case notAPublicKeyPEM
    /// The key is not an EC P-256 key; the associated value names the type found, e.g. `RSA`.
    case unsupportedKeyType(String)
    /// The key is an EC P-256 key but not a valid one: its private scalar is 0 or not below the
    /// curve order, or does not match the public key stored with it.
    case invalidPrivateKey
    /// An OpenSSL operation failed; the associated value names the operation.
    case cryptoFailure(String)

    public var description: String {
        switch self {
        case .fileUnreadable(let path, let reason):
            "cannot read key file \(path)" + (reason.map { ": \($0)" } ?? "")
        case .fileUnwritable(let path):
            "cannot write key file \(path)"
        case .notAPrivateKeyPEM:
            "no unencrypted PEM private key found (expected an APNs .p8 file: PKCS#8 EC P-256)"
        case .notAPublicKeyPEM:
            "no PEM public key found"
        case .unsupportedKeyType(let type):
            "unsupported key type \(type): APNs auth keys are EC P-256 (ES256)"
        case .invalidPrivateKey:
            "invalid EC P-256 private key: its scalar is out of range or does not match its public key (damaged key file?)"
        case .cryptoFailure(let operation):
            "OpenSSL operation failed: \(operation)"
        }
    }
}
