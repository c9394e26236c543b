@testable import JSON
import Foundation
import Testing

/// A small deterministic generator (SplitMix64) so fuzz runs are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A JSON value built by the generator, to compare against what the scanner reads back.
indirect enum GeneratedJSON: Equatable {
    case null, bool(Bool), integer(Int64), string(String), array([GeneratedJSON]), object([(String, GeneratedJSON)])

    static func == (lhs: GeneratedJSON, rhs: GeneratedJSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    static func random(depth: Int, using rng: inout SplitMix64) -> GeneratedJSON {
        switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .integer(Int64.random(in: Int64.min...Int64.max, using: &rng) >> Int64.random(in: 0...63, using: &rng))
        case 3: return .string(randomString(using: &rng))
        case 4: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in random(depth: depth + 1, using: &rng) })
        default:
            return .object((0..<Int.random(in: 0...4, using: &rng)).map { index in
                ("k\(index)" + randomString(using: &rng), random(depth: depth + 1, using: &rng))
            })
        }
    }

    static func randomString(using rng: inout SplitMix64) -> String {
        let pieces: [String] = ["a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\u{01}", "\u{1F}", "é", "☕", "😀", "\u{10FFFF}", "\u{FFFD}", "0"]
        return String((0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined())  // invariant: non-empty
    }

    /// Serialises with random whitespace and random (but valid) escaping.
    func serialize(into output: inout [UInt8], using rng: inout SplitMix64) {
        func space() {
            if Int.random(in: 0..<4, using: &rng) == 0 { output.append(contentsOf: Array(" \t\r\n".utf8).shuffled(using: &rng).prefix(2)) }
        }
        space()
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): output.append(contentsOf: String(value).utf8)
        case .string(let value): Self.serializeString(value, into: &output, using: &rng)
        case .array(let items):
            output.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                item.serialize(into: &output, using: &rng)
            }
            space()
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                space()
                Self.serializeString(key, into: &output, using: &rng)
                space()
                output.append(UInt8(ascii: ":"))
                value.serialize(into: &output, using: &rng)
            }
            space()
            output.append(UInt8(ascii: "}"))
        }
        space()
    }

    static func serializeString(_ value: String, into output: inout [UInt8], using rng: inout SplitMix64) {
        output.append(UInt8(ascii: "\""))
        for scalar in value.unicodeScalars {
            let mustEscape = scalar.value < 0x20 || scalar == "\"" || scalar == "\\"
            if mustEscape || Int.random(in: 0..<5, using: &rng) == 0 {
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16)
                    output.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).utf8)
                }
            } else {
                output.append(contentsOf: String(scalar).utf8)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

@Suite struct JSONFuzzTests {
    func readBack(_ value: JSONValue) -> GeneratedJSON? {
        switch value.kind {
        case .null: return .null
        case .boolean: return value.boolValue.map(GeneratedJSON.bool)
        case .number: return value.int64Value.map(GeneratedJSON.integer)
        case .string: return value.stringValue.map(GeneratedJSON.string)
        case .array:
            let items = value.elements.compactMap(readBack)
            return items.count == value.count ? .array(items) : nil
        case .object:
            var members: [(String, GeneratedJSON)] = []
            for (key, member) in value.members {
                guard let name = key.stringValue, let read = readBack(member) else { return nil }
                members.append((name, read))
            }
            return .object(members)
        }
    }

    @Test func generatedDocumentsRoundTrip() throws {
        var rng = SplitMix64(seed: 0xA9B5_0001)
        for _ in 0..<2000 {
            let value = GeneratedJSON.random(depth: 0, using: &rng)
            var bytes: [UInt8] = []
            value.serialize(into: &bytes, using: &rng)
            let document = try JSONScanner.parse(bytes)
            #expect(readBack(document.root) == value, "\(String(decoding: bytes, as: UTF8.self))")
            // Foundation agrees that it is JSON.
            #expect((try? JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed)) != nil)
        }
    }

    /// Thousands of mutated and random inputs: the scanner must never crash or hang, and whatever
    /// it accepts must be valid UTF-8, accepted by Foundation too, and fully readable.
    @Test func mutatedAndRandomInputsNeverCrash() throws {
        var rng = SplitMix64(seed: 0xF022_2026)
        let specials: [[UInt8]] = [
            [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF], [0x00], [0x5C], [0x22],
            Array("\\u".utf8), Array("\\ud800".utf8), Array("\\udc00".utf8), Array("{".utf8), Array("[".utf8),
            Array("]".utf8), Array("}".utf8), Array(",".utf8), Array(":".utf8), Array("-".utf8), Array("e".utf8),
            Array(".".utf8), Array("0".utf8), [0xE2, 0x98, 0x95],
        ]
        var accepted = 0
        for round in 0..<6000 {
            var bytes: [UInt8] = []
            if round % 10 == 0 {
                bytes = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            } else {
                GeneratedJSON.random(depth: 0, using: &rng).serialize(into: &bytes, using: &rng)
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    let position = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &rng)
                    switch Int.random(in: 0..<5, using: &rng) {
                    case 0 where position < bytes.count: bytes[position] = UInt8.random(in: 0...255, using: &rng)
                    case 1: bytes.insert(contentsOf: specials.randomElement(using: &rng)!, at: position)  // invariant: non-empty
                    case 2 where position < bytes.count: bytes.remove(at: position)
                    case 3: bytes = Array(bytes.prefix(position))
                    default:
                        let end = min(bytes.count, position + Int.random(in: 0...8, using: &rng))
                        bytes.insert(contentsOf: bytes[position..<end], at: position)
                    }
                }
            }
            let result = Result { () throws(JSONError) in try JSONScanner.parse(bytes) }
            switch result {
            case .success(let document):
                accepted += 1
                #expect(String(validating: bytes, as: UTF8.self) != nil)
                #expect(document.root.rawRange.upperBound <= bytes.count)
                // Foundation rejects numbers beyond Double's range, which RFC 8259 allows.
                if walk(document.root) {
                    #expect((try? JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed)) != nil,
                            "accepted \(bytes)")
                }
            case .failure(let error):
                #expect(error.byteOffset >= 0 && error.byteOffset <= bytes.count)
                #expect(error.line >= 1 && error.column >= 1)
            }
        }
        #expect(accepted > 100)  // the mutations leave a good share of valid documents
    }

    /// Touches every accessor of every value (strings decode, numbers convert) without trapping;
    /// returns whether every number fits a Double.
    @discardableResult
    func walk(_ value: JSONValue) -> Bool {
        _ = value.stringValue
        _ = value.int64Value
        _ = value.boolValue
        var finite = value.numberText.map { Double($0)?.isFinite ?? false } ?? true
        for element in value.elements { finite = walk(element) && finite }
        for (key, member) in value.members {
            #expect(key.kind == .string)
            finite = walk(member) && finite
        }
        return finite
    }
}
