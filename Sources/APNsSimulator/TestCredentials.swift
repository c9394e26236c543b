#if canImport(Glibc)
import Glibc
#endif
import APNs
import HTTP2

/// Throw-away credentials for tests, the demo and the simulator: a CA, a server certificate for
/// 127.0.0.1/localhost issued by it (`CertificateAuthority`), and an APNs auth key.
/// Never use them for real traffic.
public struct TestCredentials: Sendable {
    /// The directory holding the files.
    public var directory: String
    /// CA certificate (PEM): the `caFile` a client must trust to talk to the simulator.
    public var caFile: String
    /// Server certificate (PEM) for the simulator.
    public var serverCertificateFile: String
    /// Server private key (PEM) for the simulator.
    public var serverPrivateKeyFile: String
    /// The auth key as a `.p8` file (`AuthKey_<keyID>.p8`, PKCS#8 PEM, mode 0600).
    public var authKeyFile: String
    /// The auth key pair as PEM text.
    public var authKey: APNsAuthKeyGenerator.KeyPair
    /// The auth key's key id.
    public var keyID: String
    /// The team id the key belongs to.
    public var teamID: String

    /// Generates everything and writes the files into `directory` (created if missing).
    public static func generate(
        in directory: String,
        keyID: String = "ABC123DEFG",
        teamID: String = "TEAM123456",
        serverHosts: [String] = ["localhost", "127.0.0.1"]
    ) throws -> TestCredentials {
        let files = try CertificateAuthority().writeFiles(to: directory, serverHosts: serverHosts)
        let authKey = try APNsAuthKeyGenerator.generate()
        let authKeyFile = directory + "/AuthKey_" + keyID + ".p8"
        try CertificateFiles.write(authKey.privateKeyPKCS8PEM, to: authKeyFile, mode: 0o600)
        return TestCredentials(
            directory: directory, caFile: files.caCertificatePath, serverCertificateFile: files.serverCertificatePath,
            serverPrivateKeyFile: files.serverPrivateKeyPath, authKeyFile: authKeyFile, authKey: authKey,
            keyID: keyID, teamID: teamID)
    }

    /// The simulator's entry for trusting this auth key.
    public var simulatorAuthKey: APNsSimulatorConfiguration.AuthKey {
        .init(keyID: keyID, teamID: teamID, publicKeyPEM: authKey.publicKeyPEM)
    }

    /// A simulator configuration serving these credentials on `host`:`port` (0 = ephemeral).
    public func simulatorConfiguration(host: String = "127.0.0.1", port: Int = 0) -> APNsSimulatorConfiguration {
        APNsSimulatorConfiguration(host: host, port: port, certificateFile: serverCertificateFile,
                                   privateKeyFile: serverPrivateKeyFile, authKeys: [simulatorAuthKey])
    }
}
