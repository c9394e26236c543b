#if canImport(Glibc)
import Glibc
#endif
import Bridge
import Observability

/// Dispatches `apns-bridge <command> …` to the subcommands and maps errors to exit codes:
/// 0 success, 1 a failure while running, 2 a usage or configuration error.
enum CommandLineInterface {
    static let version = "0.1.0"

    static let usage = """
    apns-bridge \(version): Kafka push requests → APNs over HTTP/2 → Kafka results.

    Usage:
      apns-bridge run [--config FILE]        run the bridge (default config/bridge.yaml or $APNS_BRIDGE_CONFIG)
      apns-bridge check [--config FILE]      validate a configuration and load its credentials
      apns-bridge send --token HEX …         send one notification without Kafka and print its result
      apns-bridge simulator …                run the APNs simulator (HTTP/2 + TLS) on this machine
      apns-bridge demo [--requests N]        mock Kafka + simulator + bridge, end to end, on loopback
      apns-bridge bench [--requests N …]     measure the bridge against the simulator, next to h2load
      apns-bridge --version | --help         (every command takes --help)

    """

    static func main(_ arguments: [String]) -> Int32 {
        guard let command = arguments.first else {
            write(usage, to: 2)
            return 2
        }
        let rest = Array(arguments.dropFirst())
        do {
            switch command {
            case "run": return try RunCommand.main(rest)
            case "check": return try CheckCommand.main(rest)
            case "send": return try SendCommand.main(rest)
            case "simulator": return try SimulatorCommand.main(rest)
            case "demo": return try DemoCommand.main(rest)
            case "bench": return try BenchCommand.main(rest)
            case "--version", "version": write("apns-bridge \(version)\n", to: 1); return 0
            case "help" where rest.count == 1 && rest[0] != "help":
                return main([rest[0], "--help"])  // `help COMMAND` is `COMMAND --help`
            case "--help", "-h", "help": write(usage, to: 1); return 0
            default:
                write("apns-bridge: unknown command '\(command)'\n\n" + usage, to: 2)
                return 2
            }
        } catch let error as CommandLineOptions.UsageError {
            // Usage errors may quote an argument as given: printed with its control characters escaped.
            write("apns-bridge \(command): \(LogLineFormatter.escapingControlCharacters(error.description))\n", to: 2)
            return 2
        } catch let error as ConfigurationError {
            write("apns-bridge \(command): configuration error: \(error)\n", to: 2)
            return 2
        } catch let error as PipelineError {
            write("apns-bridge \(command): \(error)\n", to: 2)
            return 2
        } catch {
            write("apns-bridge \(command): \(error)\n", to: 2)
            return 1
        }
    }

    /// Loads the configuration named by `--config`, `$APNS_BRIDGE_CONFIG` or the default path,
    /// and applies its log settings.
    static func loadConfiguration(_ options: CommandLineOptions) throws -> BridgeConfiguration {
        let environment = ProcessEnvironment.variables
        // An empty variable counts as unset (a compose file's `APNS_BRIDGE_CONFIG:` blanks it).
        let fromEnvironment = environment["APNS_BRIDGE_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let path = options.value("config") ?? fromEnvironment ?? "config/bridge.yaml"
        guard path != BridgeConfiguration.notUTF8EnvironmentValue else {
            throw ConfigurationError(keyPath: "", message: "environment variable APNS_BRIDGE_CONFIG is not valid UTF-8")
        }
        let configuration = try BridgeConfiguration.load(path: path, environment: environment)
        LoggingSystem.bootstrap(level: configuration.log.level, format: configuration.log.format)
        return configuration
    }

    /// Writes text to a file descriptor (1 standard output, 2 standard error).
    static func write(_ text: String, to descriptor: Int32) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)  // invariant: non-empty
                if written <= 0 { return }
                offset += written
            }
        }
    }
}

/// The process environment as a dictionary (for `${VAR}` expansion and `$APNS_BRIDGE_CONFIG`).
/// A value that is not UTF-8 is not read with its bytes replaced: it stands as
/// ``BridgeConfiguration/notUTF8EnvironmentValue``, which a `${VAR}` reference refuses by name.
enum ProcessEnvironment {
    static var variables: [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(entry).assumingMemoryBound(to: UInt8.self), count: strlen(entry))
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")),
               let name = String(validating: bytes[..<equals], as: UTF8.self) {
                let value = String(validating: bytes[(equals + 1)...], as: UTF8.self)
                result[name] = value ?? BridgeConfiguration.notUTF8EnvironmentValue
            }
            pointer += 1
        }
        return result
    }
}
