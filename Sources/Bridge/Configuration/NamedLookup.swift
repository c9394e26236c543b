/// Values by a configured name (an app, a topic, a pool), looked up for every record or result.
///
/// While there are few names (`listLimit`) they are compared in order: comparing a name with the
/// same string is a check of its two words, with another name a length check or a short compare,
/// where hashing a `String` costs a few hundred instructions. Past that, a dictionary. Immutable,
/// so any thread may read it.
struct NamedLookup<Value: Sendable>: Sendable {
    static var listLimit: Int { 8 }

    private let list: [(name: String, bytes: [UInt8], value: Value)]
    private let dictionary: [String: Value]
    /// Every name is ASCII, so equal bytes and equal strings are the same thing (`String`'s `==`
    /// also equates canonically equivalent non-ASCII spellings).
    private let namesAreASCII: Bool

    /// The first value of each name wins.
    init(_ entries: [(name: String, value: Value)]) {
        var dictionary: [String: Value] = [:]
        var list: [(name: String, bytes: [UInt8], value: Value)] = []
        for entry in entries where dictionary[entry.name] == nil {
            dictionary[entry.name] = entry.value
            list.append((entry.name, Array(entry.name.utf8), entry.value))
        }
        self.dictionary = dictionary
        self.list = list.count <= Self.listLimit ? list : []
        namesAreASCII = dictionary.keys.allSatisfy { $0.utf8.allSatisfy { $0 < 0x80 } }
    }

    /// Number of names.
    var count: Int { dictionary.count }

    /// The value named `name`, or nil.
    subscript(_ name: String) -> Value? {
        guard dictionary.count <= Self.listLimit else { return dictionary[name] }
        for entry in list where entry.name == name { return entry.value }
        return nil
    }

    /// The value whose name is these UTF-8 bytes, or nil; no `String` is made while the names are
    /// few and ASCII (the same answer as `self[String(decoding: bytes, as: UTF8.self)]`).
    func value(named bytes: UnsafeBufferPointer<UInt8>) -> Value? {
        guard dictionary.count <= Self.listLimit, namesAreASCII, bytes.allSatisfy({ $0 < 0x80 }) else {
            return self[String(decoding: bytes, as: UTF8.self)]
        }
        for entry in list where entry.bytes.count == bytes.count {
            let equal = entry.bytes.withUnsafeBufferPointer { name in
                name.elementsEqual(bytes)
            }
            if equal { return entry.value }
        }
        return nil
    }
}
