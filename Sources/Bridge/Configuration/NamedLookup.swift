#if canImport(Glibc)
import Glibc
#endif
/// Values by a configured name (an app, a topic, a pool), looked up for every record or result.
///
/// While there are few names (`listLimit`) they are compared in order: comparing a name with the
/// same string is a check of its two words, with another name a length check or a short compare,
/// where hashing a `String` costs a few hundred instructions. Past that, a dictionary. Immutable,
/// so any thread may read it.
struct NamedLookup<Value: Sendable>: Sendable {
    static var listLimit: Int { 8 }

    /// The names in order, their UTF-8 bytes one after the other in `nameBytes` (name `i` from
    /// `nameStarts[i]` to `nameStarts[i + 1]`), and their values. Empty past `listLimit`.
    private let names: [String]
    private let nameBytes: [UInt8]
    private let nameStarts: [Int]
    private let values: [Value]
    private let dictionary: [String: Value]
    /// Every name is ASCII, so bytes equal to none of them mean no match (`String`'s `==` also
    /// equates canonically equivalent non-ASCII spellings).
    private let namesAreASCII: Bool

    /// The first value of each name wins.
    init(_ entries: [(name: String, value: Value)]) {
        var dictionary: [String: Value] = [:]
        var names: [String] = [], values: [Value] = []
        for entry in entries where dictionary[entry.name] == nil {
            dictionary[entry.name] = entry.value
            names.append(entry.name)
            values.append(entry.value)
        }
        self.dictionary = dictionary
        if names.count > Self.listLimit {
            names = []
            values = []
        }
        self.names = names
        self.values = values
        nameBytes = names.flatMap { Array($0.utf8) }
        nameStarts = names.reduce(into: [0]) { starts, name in starts.append(starts[starts.count - 1] + name.utf8.count) }
        namesAreASCII = dictionary.keys.allSatisfy { $0.utf8.allSatisfy { $0 < 0x80 } }
    }

    /// Number of names.
    var count: Int { dictionary.count }

    /// The value named `name`, or nil.
    subscript(_ name: String) -> Value? {
        guard dictionary.count <= Self.listLimit else { return dictionary[name] }
        for index in names.indices where names[index] == name { return values[index] }
        return nil
    }

    /// The value whose name is these UTF-8 bytes, or nil; no `String` is made while the names are
    /// few (the same answer as `self[String(decoding: bytes, as: UTF8.self)]`).
    func value(named bytes: UnsafeBufferPointer<UInt8>) -> Value? {
        guard dictionary.count <= Self.listLimit else { return dictionary[String(decoding: bytes, as: UTF8.self)] }
        let found = nameBytes.withUnsafeBufferPointer { all -> Int? in
            for index in values.indices where nameStarts[index + 1] - nameStarts[index] == bytes.count {
                // One `memcmp` (an empty name equals empty bytes without one).
                guard let name = all.baseAddress?.advanced(by: nameStarts[index]), let given = bytes.baseAddress else {
                    return index
                }
                if memcmp(name, given, bytes.count) == 0 { return index }
            }
            return nil
        }
        if let found { return values[found] }
        // Equal bytes are equal strings; unequal bytes can still be equivalent strings unless
        // both sides are ASCII.
        guard namesAreASCII, bytes.allSatisfy({ $0 < 0x80 }) else { return self[String(decoding: bytes, as: UTF8.self)] }
        return nil
    }
}
