#if canImport(Glibc)
import Glibc
#endif
import APNs
import APNsSimulator
import Bridge
import HTTP2
import Dispatch

/// `apns-bridge simulator`: the APNs simulator as a standalone server on this machine.
enum SimulatorCommand {
    static let help = """
    Usage: apns-bridge simulator [--listen HOST:PORT] (--credentials DIR [--hostname NAME …] | --cert FILE --key FILE --auth-key KID:TEAM:PUBKEY_PEM …)
                                 [--unregistered TOKEN[:MILLIS] …] [--token-app TOKEN:BUNDLE_ID …]
                                 [--max-streams N] [--max-connections N]
                                 [--threads N] [--client-ca FILE] [--sandbox] [faults…]

    An HTTP/2 + TLS server that answers like APNs: it verifies provider JWTs (ES256) against the
    trusted public keys and applies Apple's validation rules (BadDeviceToken, MissingTopic,
    PayloadTooLarge, 403 provider-token errors, 410 Unregistered with a millisecond timestamp …).

      --listen HOST:PORT   address to listen on (default 127.0.0.1:2197; port 0 picks one)
      --credentials DIR    generate test credentials into DIR (CA ca.pem, server certificate,
                           AuthKey_<kid>.p8) and use them; prints what a bridge config needs
      --hostname NAME      with --credentials: the server certificate is also valid for NAME
                           (besides localhost and 127.0.0.1), e.g. a compose service name
      --cert, --key        the server certificate and key (PEM), instead of --credentials
      --auth-key K:T:FILE  trust the provider key K of team T whose public key (PEM) is FILE
      --unregistered TOKEN answer 410 Unregistered for TOKEN (timestamp MILLIS, default now)
      --token-app T:BUNDLE TOKEN was issued to app BUNDLE: pushes of it to another app's topic
                           are answered 400 DeviceTokenNotForTopic
      --max-streams N      SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)
      --max-connections N  the most connections open at once (default: what the descriptor limit
                           leaves room for); at the limit a new connection replaces the one idle
                           longest (no request being answered; GOAWAY), or is closed at once when
                           none is idle
      --threads N          event loop threads (default 1)
      --sandbox            answer as the development (sandbox) environment does: every 200
                           carries an apns-unique-id

    """ + "\n" + faultHelp + """
    Runs until SIGTERM or SIGINT.

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        // First, while this is the only thread: a stop signal from now on waits for the waiter.
        SignalWaiter.blockStopSignals()
        let valued: Set<String> = [
            "listen", "credentials", "hostname", "cert", "key", "auth-key", "unregistered", "token-app", "max-streams", "max-connections", "threads",
            "client-ca",
        ]
        let options = try CommandLineOptions(arguments, accepting: .init(valued: valued.union(faultOptions), flags: ["help", "sandbox"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        let (host, port) = try parseListen(options.value("listen") ?? "127.0.0.1:2197")
        let faults = try faults(from: options)
        var configuration: APNsSimulatorConfiguration
        if let directory = options.value("credentials") {
            let credentials = try TestCredentials.generate(
                in: directory, serverHosts: ["localhost", "127.0.0.1"] + options.values("hostname"))
            configuration = credentials.simulatorConfiguration(host: host, port: port)
            CommandLineInterface.write("""
            generated test credentials in \(directory):
              apns.ca_file: \(credentials.caFile)
              auth: {type: token, key_file: \(credentials.authKeyFile), key_id: \(credentials.keyID), team_id: \(credentials.teamID)}

            """, to: 1)
        } else {
            guard options.value("cert") != nil || options.value("key") != nil else {
                throw CommandLineOptions.UsageError(description: "either --credentials DIR or --cert FILE --key FILE is required")
            }
            configuration = APNsSimulatorConfiguration(
                host: host, port: port, certificateFile: try options.required("cert"), privateKeyFile: try options.required("key")
            )
        }
        for entry in options.values("auth-key") {
            let parts = entry.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3 else {
                throw CommandLineOptions.UsageError(description: "--auth-key must be KEYID:TEAMID:PUBLIC_KEY_FILE")
            }
            let pem = try readFile(parts[2])
            configuration.authKeys.append(.init(keyID: parts[0], teamID: parts[1], publicKeyPEM: pem))
        }
        let now = Int64(time(nil)) * 1000
        for entry in options.values("unregistered") {
            let parts = entry.split(separator: ":").map(String.init)
            guard let token = parts.first, parts.count <= 2, parts.count == 1 || Int64(parts[1]) != nil else {
                throw CommandLineOptions.UsageError(description: "--unregistered must be TOKEN or TOKEN:MILLIS")
            }
            configuration.unregisteredTokens[token.lowercased()] = parts.count == 2 ? Int64(parts[1]) ?? now : now
        }
        for entry in options.values("token-app") {
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw CommandLineOptions.UsageError(description: "--token-app must be TOKEN:BUNDLE_ID, got '\(entry)'")
            }
            configuration.tokenApps[parts[0].lowercased()] = parts[1]
        }
        configuration.maxConcurrentStreams = try options.integer("max-streams", default: 1000, in: 1...100_000)
        if options.value("max-connections") != nil {
            configuration.maxConnections = try options.integer("max-connections", default: 0, in: 1...1_000_000)
        }
        configuration.threads = try options.integer("threads", default: 1, in: 1...64)
        configuration.clientCAFile = options.value("client-ca")
        configuration.sendsUniqueID = options.flag("sandbox")
        configuration.faults = faults

        let simulator: APNsSimulator
        do {
            simulator = try APNsSimulator(configuration: configuration)
            try simulator.start()
        } catch {
            // Keys, certificates, faults and the address all come from the command line: a
            // usage error (exit 2). The errors name files, never their contents.
            throw CommandLineOptions.UsageError(description: "\(error)")
        }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        CommandLineInterface.write("APNs simulator listening on https://\(shownHost):\(simulator.port)\n", to: 1)
        let stop = DispatchSemaphore(value: 0)
        _ = try SignalWaiter { _, _ in stop.signal() }
        stop.wait()
        simulator.close()
        return 0
    }

    static func parseListen(_ text: String) throws -> (String, Int) {
        guard let (host, port) = HostPort.split(Substring(text), defaultPort: nil), !host.isEmpty else {
            throw CommandLineOptions.UsageError(description: "--listen must be HOST:PORT or [IPv6]:PORT, got '\(text)'")
        }
        return (host, port)
    }

    private static func readFile(_ path: String) throws -> String {
        if let problem = ReadableFile.problem(at: path) {
            throw CommandLineOptions.UsageError(description: "cannot read \(path): \(problem)")
        }
        guard let file = fopen(path, "r") else {
            throw CommandLineOptions.UsageError(description: "cannot read \(path)")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
