import APNs
import YAML

extension BridgeConfiguration {
    static func parseApps(_ top: ConfigurationMapping) throws(ConfigurationError) -> [AppSettings] {
        let node = try top.required("apps")
        guard case .sequence(let items, _) = node.node else {
            throw node.error("expected a list of apps, \(node.got())")
        }
        guard !items.isEmpty else { throw node.error("at least one app is required") }
        var apps: [AppSettings] = []
        var names: Set<String> = []
        for (index, item) in items.enumerated() {
            let app = try parseApp(node.child(item, path: "apps[\(index)]"))
            guard names.insert(app.name).inserted else {
                throw ConfigurationError(keyPath: "apps[\(index)].name", message: "duplicate app name \"\(app.name)\"",
                                         line: item["name"]?.line)
            }
            apps.append(app)
        }
        return apps
    }

    static func parseApp(_ node: ConfigurationNode) throws(ConfigurationError) -> AppSettings {
        let section = try node.mapping(allowed: ["name", "bundle_id", "environment", "connections", "auth"])
        let nameNode = try section.required("name")
        let name = try nameNode.name()
        let bundleNode = try section.required("bundle_id")
        let bundleID = try bundleNode.string()
        guard bundleID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
            throw bundleNode.error("must not contain spaces or control characters")
        }
        // Both go into every result and invalid-token record, whose size must stay within
        // `ResultPublisher.minimumProducerRecordBytes` (and into metric labels and log lines).
        for (node, text) in [(nameNode, name), (bundleNode, bundleID)] where text.utf8.count > AppSettings.maximumNameBytes {
            throw node.error("must be at most \(AppSettings.maximumNameBytes) bytes long")
        }
        var app = AppSettings(name: name, bundleID: bundleID, auth: try parseAuth(section.required("auth")))
        if let value = section.optional("environment") { app.environment = try value.choice(PushEnvironment.allCases) }
        if let value = section.optional("connections") { app.connections = try value.integer(minimum: 1, maximum: 100) }
        return app
    }

    static func parseAuth(_ node: ConfigurationNode) throws(ConfigurationError) -> AppAuthentication {
        let section = try node.mapping(allowed: ["type", "key_file", "key_id", "team_id", "cert_file", "p12_file", "passphrase"],
                                       secretKeys: ["passphrase"])
        let type = try section.required("type").choice(AuthenticationType.allCases)
        func reject(_ keys: [String]) throws(ConfigurationError) {
            for key in keys where section.has(key) {
                throw ConfigurationError(keyPath: section.keyPath(key), message: "not allowed with type \(type.rawValue)",
                                         line: section.entries[key]?.line)
            }
        }
        let passphrase = try section.optional("passphrase", isSecret: true)?.optionalString()
        switch type {
        case .token:
            try reject(["cert_file", "p12_file", "passphrase"])
            return .token(keyFile: try section.required("key_file").filePath(),
                          keyID: try appleIdentifier(section.required("key_id")),
                          teamID: try appleIdentifier(section.required("team_id")))
        case .certificate:
            try reject(["key_id", "team_id"])
            if section.has("p12_file") {
                if section.has("cert_file") || section.has("key_file") {
                    throw node.error("give either cert_file and key_file, or p12_file, not both")
                }
                return .certificatePKCS12(p12File: try section.required("p12_file").filePath(), passphrase: passphrase)
            }
            guard section.has("cert_file") || section.has("key_file") else {
                throw ConfigurationError(keyPath: section.keyPath("cert_file"),
                                         message: "required key is missing (or give p12_file)", line: node.node.line)
            }
            return .certificate(certFile: try section.required("cert_file").filePath(),
                                keyFile: try section.required("key_file").filePath(), passphrase: passphrase)
        }
    }

    /// Apple key and team ids: exactly 10 letters or digits.
    static func appleIdentifier(_ node: ConfigurationNode) throws(ConfigurationError) -> String {
        let text = try node.string()
        guard text.utf8.count == 10, text.utf8.allSatisfy({ EnvironmentExpansion.isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) }) else {
            throw node.error("must be 10 characters (letters and digits), \(node.got(text))")
        }
        return text
    }
}

/// `auth.type` spellings.
enum AuthenticationType: String, CaseIterable {
    case token, certificate
}
