import APNs
import Observability

/// Settings of an `APNsSimulator`: where it listens, its TLS identity, which provider keys it
/// trusts and which tokens it reports as unregistered.
public struct APNsSimulatorConfiguration: Sendable {
    /// A provider auth key the simulator trusts.
    public struct AuthKey: Sendable {
        /// The 10-character key id (`kid`).
        public var keyID: String
        /// The team the key belongs to (`iss`).
        public var teamID: String
        /// The key's public half as PEM.
        public var publicKeyPEM: String

        /// Creates a trusted key entry.
        public init(keyID: String, teamID: String, publicKeyPEM: String) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKeyPEM = publicKeyPEM
        }
    }

    /// Listen address (default loopback).
    public var host: String
    /// Listen port; 0 picks an ephemeral port (see `APNsSimulator.port`).
    public var port: Int
    /// PEM certificate (chain) the simulator presents.
    public var certificateFile: String
    /// PEM private key of that certificate.
    public var privateKeyFile: String
    /// CA for client certificates. When set, every client must present a certificate issued by
    /// it (certificate auth): a request without `authorization` is accepted for the certificate's
    /// bundle id (its subject `UID`, else its common name without Apple's "Apple Push Services: "
    /// prefix) and that id's `.voip`/`.complication`/… topics, and answered 400 TopicDisallowed
    /// for other topics; `authorization` is ignored on such a connection, as APNs ignores it with
    /// certificate auth.
    public var clientCAFile: String?
    /// Trusted provider keys.
    public var authKeys: [AuthKey]
    /// Device token (hex) → Unix milliseconds reported in 410 Unregistered answers.
    public var unregisteredTokens: [String: Int64]
    /// Device token (hex) → the bundle id of the app it was issued to: a request for it to
    /// another app's topic is answered 400 DeviceTokenNotForTopic.
    public var tokenApps: [String: String]
    /// SETTINGS_MAX_CONCURRENT_STREAMS the simulator announces.
    public var maxConcurrentStreams: Int
    /// The most connections open at once; nil: as many as the process's descriptor limit
    /// leaves room for (``HTTP2Server/defaultMaxConnections``). At the limit a new connection
    /// takes the place of the one idle longest (no request being answered), or is refused when
    /// none is idle.
    public var maxConnections: Int?
    /// Event loop threads serving connections.
    public var threads: Int
    /// Send `apns-unique-id` on 200 answers, as Apple's sandbox does.
    public var sendsUniqueID: Bool
    /// Faults in force from the start (none by default).
    public var faults: APNsSimulatorFaults

    /// Creates a configuration.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        certificateFile: String,
        privateKeyFile: String,
        clientCAFile: String? = nil,
        authKeys: [AuthKey] = [],
        unregisteredTokens: [String: Int64] = [:],
        tokenApps: [String: String] = [:],
        maxConcurrentStreams: Int = 1000,
        maxConnections: Int? = nil,
        threads: Int = 1,
        sendsUniqueID: Bool = false,
        faults: APNsSimulatorFaults = APNsSimulatorFaults()
    ) {
        self.host = host
        self.port = port
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
        self.clientCAFile = clientCAFile
        self.authKeys = authKeys
        self.unregisteredTokens = unregisteredTokens
        self.tokenApps = tokenApps
        self.maxConcurrentStreams = maxConcurrentStreams
        self.maxConnections = maxConnections
        self.threads = threads
        self.sendsUniqueID = sendsUniqueID
        self.faults = faults
    }

    /// Builds the rules this configuration describes (loads and checks the public keys).
    public func makeRules(
        clock: @escaping @Sendable () -> Int64 = { Timestamp.nowMilliseconds() / 1000 }
    ) throws(APNsKeyError) -> APNsSimulatorRules {
        var keys: [String: JWTVerifier.TrustedKey] = [:]
        for key in authKeys {
            keys[key.keyID] = JWTVerifier.TrustedKey(publicKey: try APNsPublicKey(pem: key.publicKeyPEM), teamID: key.teamID)
        }
        return APNsSimulatorRules(verifier: JWTVerifier(keys: keys, clock: clock),
                                  unregisteredTokens: unregisteredTokens, tokenApps: tokenApps, sendsUniqueID: sendsUniqueID,
                                  certificateAuthPolicy: clientCAFile == nil ? nil : Self.certificateTopicPolicy)
    }

    /// Certificate auth: `bundleID` (from the client certificate) may push to the topics an
    /// Apple push certificate covers: the bundle itself, its `.voip` and its `.complication`
    /// topics (other push types, location and Live Activities among them, take token auth); no
    /// topic means the bundle itself.
    static let certificateTopicPolicy: APNsSimulatorRules.CertificateAuthPolicy = { bundleID, topic in
        guard !bundleID.isEmpty else { return .badCertificate }
        guard let topic else { return nil }
        let covered = [bundleID, bundleID + ".voip", bundleID + ".complication"]
        return covered.contains(topic) ? nil : .topicDisallowed
    }
}
