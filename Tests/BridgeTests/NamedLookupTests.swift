import Testing
@testable import Bridge

/// `NamedLookup` answers as a `[String: Value]` would, by string and by UTF-8 bytes, with few
/// names (compared in order) and many (a dictionary).
@Suite struct NamedLookupTests {
    private func byBytes(_ lookup: NamedLookup<Int>, _ name: String) -> Int? {
        Array(name.utf8).withUnsafeBufferPointer { lookup.value(named: $0) }
    }

    @Test(arguments: [1, NamedLookup<Int>.listLimit, NamedLookup<Int>.listLimit + 1, 40])
    func answersAsADictionary(count: Int) {
        let names = (0..<count).map { "app-\($0)" }
        let lookup = NamedLookup(names.enumerated().map { ($1, $0) })
        #expect(lookup.count == count)
        for (index, name) in names.enumerated() {
            #expect(lookup[name] == index)
            #expect(lookup[String(name.utf8.map { Character(UnicodeScalar($0)) })] == index)  // another string, same bytes
            #expect(byBytes(lookup, name) == index)
        }
        for missing in ["", "app-", "app-\(count)", "App-0", "app-0 ", "app-00"] {
            #expect(lookup[missing] == nil, "\(missing)")
            #expect(byBytes(lookup, missing) == nil, "\(missing)")
        }
    }

    @Test func theFirstValueOfANameWins() {
        let lookup = NamedLookup([("demo", 1), ("demo", 2), ("other", 3)])
        #expect(lookup.count == 2)
        #expect(lookup["demo"] == 1)
        #expect(byBytes(lookup, "demo") == 1)
    }

    /// `String` equates canonically equivalent spellings; looking up by bytes must agree.
    @Test func canonicallyEquivalentNamesMatchAsStringsDo() {
        let precomposed = "caf\u{E9}"  // é as one scalar
        let decomposed = "cafe\u{301}"  // e + combining acute accent
        let lookup = NamedLookup([(precomposed, 7), ("plain", 8)])
        #expect(lookup[decomposed] == 7)
        #expect(byBytes(lookup, decomposed) == 7)
        #expect(byBytes(lookup, precomposed) == 7)
        let kelvin = NamedLookup([("\u{212A}", 9)])  // KELVIN SIGN, canonically "K"
        #expect(kelvin["K"] == 9)
        #expect(byBytes(kelvin, "K") == 9)
    }
}
