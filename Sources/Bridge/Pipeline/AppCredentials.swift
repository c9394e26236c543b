import APNs
import HTTP2

/// An app's ready-to-use APNs credentials: the TLS context its connections use and, for token
/// auth, the JWT source.
struct AppCredentials: Sendable {
    let tls: TLSClientContext
    let tokenProvider: APNsTokenProvider?

    /// Loads the key or certificate files of `app`, with a token provider of its own.
    init(app: AppSettings, caFile: String?) throws(PipelineError) {
        var providers: [String: APNsTokenProvider] = [:]
        try self.init(app: app, caFile: caFile, tokenProviders: &providers)
    }

    /// Loads the key or certificate files of `app`.
    ///
    /// Apps that use the same key (team id and key id) share one token provider, so one JWT per
    /// key at a time serves their connections (`tokenProviders` collects them by `team/key`).
    /// - Throws: `PipelineError` naming the app and the file; never key material or passphrases.
    init(app: AppSettings, caFile: String?, tokenProviders: inout [String: APNsTokenProvider]) throws(PipelineError) {
        do {
            switch app.auth {
            case .token(let keyFile, let keyID, let teamID):
                if let shared = tokenProviders["\(teamID)/\(keyID)"] {
                    tokenProvider = shared
                } else {
                    let key = try APNsSigningKey(pemFile: keyFile)
                    let provider = APNsTokenProvider(signer: JWTSigner(key: key, keyID: keyID, teamID: teamID))
                    tokenProviders["\(teamID)/\(keyID)"] = provider
                    tokenProvider = provider
                }
                tls = try TLSClientContext(TLSClientConfiguration(caFile: caFile))
            case .certificate(let certFile, let keyFile, let passphrase):
                tokenProvider = nil
                tls = try TLSClientContext(
                    TLSClientConfiguration(
                        caFile: caFile, certificateFile: certFile, privateKeyFile: keyFile, privateKeyPassphrase: passphrase
                    )
                )
            case .certificatePKCS12(let p12File, let passphrase):
                tokenProvider = nil
                tls = try TLSClientContext(
                    TLSClientConfiguration(caFile: caFile, privateKeyPassphrase: passphrase, pkcs12File: p12File)
                )
            }
        } catch {
            throw PipelineError(component: "apps.\(app.name).auth", message: "\(error)")
        }
    }
}

/// A component of the pipeline could not be set up.
public struct PipelineError: Error, Sendable, CustomStringConvertible {
    /// What failed, e.g. `apps.chat.auth` or `kafka.consumer`.
    public var component: String
    /// Why, without secrets.
    public var message: String

    /// Creates an error.
    public init(component: String, message: String) {
        self.component = component
        self.message = message
    }

    public var description: String { "\(component): \(message)" }
}
