import APNs
/// One entry of `apps`: credentials, bundle id and environment of an app.
public struct AppSettings: Sendable, Equatable {
    /// The longest `name` and `bundle_id`, in UTF-8 bytes (Apple's bundle ids are far shorter).
    public static let maximumNameBytes = 255

    /// `name` (required, unique): what requests put in their `app` field.
    public var name: String
    /// `bundle_id` (required): the default `apns-topic`.
    public var bundleID: String
    /// `environment` (default production).
    public var environment: PushEnvironment
    /// `connections` (default 1, at least 1): HTTP/2 connections per environment.
    public var connections: Int
    /// `auth` (required).
    public var auth: AppAuthentication

    /// Creates app settings.
    public init(name: String, bundleID: String, environment: PushEnvironment = .production, connections: Int = 1,
                auth: AppAuthentication) {
        self.name = name
        self.bundleID = bundleID
        self.environment = environment
        self.connections = connections
        self.auth = auth
    }
}

/// How an app authenticates to APNs. Descriptions and reflection never show the passphrase.
public enum AppAuthentication: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `type: token`: ES256 JWTs signed with a `.p8` key.
    case token(keyFile: String, keyID: String, teamID: String)
    /// `type: certificate` with `cert_file` and `key_file` (PEM; the key may be encrypted).
    case certificate(certFile: String, keyFile: String, passphrase: String?)
    /// `type: certificate` with `p12_file` (PKCS#12).
    case certificatePKCS12(p12File: String, passphrase: String?)

    /// A summary without secrets.
    public var description: String {
        switch self {
        case .token(let keyFile, let keyID, let teamID):
            "token(keyFile: \(keyFile), keyID: \(keyID), teamID: \(teamID))"
        case .certificate(let certFile, let keyFile, let passphrase):
            "certificate(certFile: \(certFile), keyFile: \(keyFile), passphrase: \(passphrase == nil ? "none" : "<redacted>"))"
        case .certificatePKCS12(let p12File, let passphrase):
            "certificatePKCS12(p12File: \(p12File), passphrase: \(passphrase == nil ? "none" : "<redacted>"))"
        }
    }

    /// Same as ``description``: no secrets.
    public var debugDescription: String { description }

    /// The same authentication without its passphrase: what is kept once the credentials are
    /// loaded (a passphrase is only needed to decrypt the key, once).
    public var withoutPassphrase: AppAuthentication {
        switch self {
        case .token: self
        case .certificate(let certFile, let keyFile, _): .certificate(certFile: certFile, keyFile: keyFile, passphrase: nil)
        case .certificatePKCS12(let p12File, _): .certificatePKCS12(p12File: p12File, passphrase: nil)
        }
    }

    /// A mirror without the passphrase (so `dump` cannot leak it).
    public var customMirror: Mirror {
        Mirror(self, children: ["summary": description], displayStyle: .enum)
    }
}

extension BridgeConfiguration {
    /// The same configuration with every app's passphrase removed. The pipeline keeps this one
    /// once the credentials are loaded, so no passphrase stays referenced for the life of the
    /// process (docs/SECURITY.md says what Swift strings cannot guarantee beyond that).
    public func removingPassphrases() -> BridgeConfiguration {
        var copy = self
        for index in copy.apps.indices { copy.apps[index].auth = copy.apps[index].auth.withoutPassphrase }
        return copy
    }
}
