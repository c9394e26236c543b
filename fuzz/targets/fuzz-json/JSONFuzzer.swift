import FuzzSupport
import JSON

/// Arbitrary bytes through the strict JSON scanner; what it accepts is walked with the typed
/// accessors, and the object form with unique members (what APNs answers and JWT headers use)
/// must agree with it.
@main
enum JSONFuzzer {
    static func main() {
        runFuzzer { bytes in
            guard let document = try? JSONScanner.parse(bytes) else {
                precondition(JSONScanner.parseObjectWithUniqueMembers(bytes) == nil, "accepted as object, rejected as JSON")
                return
            }
            walk(document.root, depth: 0)
            if JSONScanner.parseObjectWithUniqueMembers(bytes) != nil {
                precondition(document.root.kind == .object, "parseObjectWithUniqueMembers accepted a non-object")
            }
        }
    }

    static func walk(_ value: JSONValue, depth: Int) {
        precondition(depth <= JSONScanner.defaultMaximumDepth + 1, "nesting deeper than the limit was accepted")
        _ = value.stringValue
        _ = value.int64Value
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
