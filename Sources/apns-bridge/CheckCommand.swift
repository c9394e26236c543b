import APNs
import Bridge

/// `apns-bridge check`: validates a configuration and everything it points at, without connecting.
enum CheckCommand {
    static let help = """
    Usage: apns-bridge check [--config FILE] [--quiet]

    Validates everything that can be checked without connecting to Kafka or APNs:
      - the configuration (exit 2 naming the key on an error);
      - every app's credentials: a token key loads and signs a provider token; a certificate
        and its key (or a PKCS#12 file) load with the passphrase and match; certificates are
        valid now, with a warning when they expire within 30 days;
      - apns.ca_file reads and holds certificates;
      - librdkafka accepts every kafka.consumer / kafka.producer property (set on a throwaway
        configuration; properties that carry the delivery guarantees are refused);
      - key files are not readable by group or others (a warning).
    Then prints the effective configuration (defaults filled in, ${VAR} expanded) with
    passphrases and secret librdkafka properties redacted. Key material is never printed.

    Exit 0 when everything is usable (warnings included), 2 when something is not.

      --quiet   print only warnings and errors

    """

    static func main(_ arguments: [String]) throws -> Int32 {
        let options = try CommandLineOptions(arguments, accepting: .init(valued: ["config"], flags: ["help", "quiet"]))
        if options.flag("help") {
            CommandLineInterface.write(help, to: 1)
            return 0
        }
        let configuration = try CommandLineInterface.loadConfiguration(options)
        let quiet = options.flag("quiet")
        let findings = ConfigurationCheck.run(configuration)
        var report = ""
        for finding in findings where !quiet || finding.severity != .ok {
            report += "\(finding)\n"
        }
        let errors = findings.filter { $0.severity == .error }
        let warnings = findings.filter { $0.severity == .warning }
        if !quiet {
            report += "\neffective configuration (secrets redacted):\n" + configuration.effectiveYAML() + "\n"
        }
        if errors.isEmpty {
            report += "configuration OK" + (warnings.isEmpty ? "" : " (\(warnings.count) warning(s))") + "\n"
        }
        CommandLineInterface.write(report, to: 1)
        guard errors.isEmpty else {
            let problems = errors.map { "  \($0.subject): \($0.message)\n" }.joined()
            CommandLineInterface.write("apns-bridge check: \(errors.count) problem(s):\n" + problems, to: 2)
            return 2
        }
        return 0
    }
}
