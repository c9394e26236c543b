import Foundation
import FuzzSupport
import JSON

/// Arbitrary bytes through the strict JSON scanner; what it accepts is walked with the typed
/// accessors, the object form with unique members (what APNs answers and JWT headers use) must
/// agree with it, and arrays of strings must decode as Foundation's parser decodes them.
@main
enum JSONFuzzer {
    static func main() {
        runFuzzer { bytes in
            guard let document = try? JSONScanner.parse(bytes) else {
                precondition(JSONScanner.parseObjectWithUniqueMembers(bytes) == nil, "accepted as object, rejected as JSON")
                return
            }
            walk(document.root, depth: 0)
            compareStringsWithFoundation(document.root, bytes)
            if JSONScanner.parseObjectWithUniqueMembers(bytes) != nil {
                precondition(document.root.kind == .object, "parseObjectWithUniqueMembers accepted a non-object")
            }
        }
    }

    /// A differential check of string decoding (escapes, surrogate pairs, UTF-8): when the
    /// document is an array of strings that Foundation's parser also reads, both read the same
    /// strings. Inputs Foundation treats differently are skipped, not compared: it rejects some
    /// valid ones (e.g. deep nesting), and it drops a U+FEFF that starts a string or follows an
    /// escape, which the scanner rightly keeps (RFC 8259: inside a string it is a character like
    /// any other), so strings holding one are not compared.
    static func compareStringsWithFoundation(_ root: JSONValue, _ bytes: [UInt8]) {
        let ours = root.elements.map(\.stringValue)
        guard root.kind == .array, ours.allSatisfy({ $0.map { !$0.unicodeScalars.contains("\u{FEFF}") } ?? false }),
              let theirs = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) as? [String]
        else { return }
        precondition(ours == theirs.map { Optional($0) }, "strings decoded as \(ours), Foundation reads \(theirs)")
    }

    static func walk(_ value: JSONValue, depth: Int) {
        precondition(depth <= JSONScanner.defaultMaximumDepth + 1, "nesting deeper than the limit was accepted")
        _ = value.stringValue
        if let plain = value.int64Value {
            precondition(value.integralValue == plain, "an integer read differently by value than as written")
        }
        if let whole = value.integralValue, let text = value.numberText, let double = Double(text) {
            precondition(abs(Double(whole) - double) <= abs(double) * 1e-15, "\(text) read as the whole number \(whole)")
        }
        _ = value.boolValue
        _ = value.numberText
        _ = value.rawBytes
        switch value.kind {
        case .object:
            for (key, member) in value.members {
                // invariant: the scanner only accepts string keys.
                let name = key.stringValue!
                precondition(value[name] != nil, "member \(name) not found by its key")
                walk(member, depth: depth + 1)
            }
        case .array:
            for element in value.elements { walk(element, depth: depth + 1) }
        default:
            break
        }
    }
}
