extension JSONScanner {
    /// Parses `bytes` as one JSON object whose member names are all distinct; nil for anything
    /// else. For small protocol objects (JWT headers and claims, APNs error bodies) where a
    /// duplicated member must not let two readers see different values.
    public static func parseObjectWithUniqueMembers(_ bytes: [UInt8]) -> JSONValue? {
        guard let object = try? parse(bytes).root, object.kind == .object else { return nil }
        var names = Set<String>()
        for (key, _) in object.members {
            guard let name = key.stringValue, names.insert(name).inserted else { return nil }
        }
        return object
    }
}
