import Testing
@testable import APNs

@Suite struct InternalsTests {
    @Test func generatedUUIDsAreVersionFourLowercaseAndDistinct() {
        let generator = SimulatorUUIDGenerator()
        var seen = Set<String>()
        for _ in 0..<1000 {
            let uuid = generator.next()
            let bytes = Array(uuid.utf8)
            #expect(APNsSimulatorRules.isValidUUID(uuid))
            #expect(uuid == uuid.lowercased())
            #expect(bytes[14] == UInt8(ascii: "4"))
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(bytes[19]))
            seen.insert(uuid)
        }
        #expect(seen.count == 1000)
    }

    @Test func flatJSONParsesMembersAndRejectsMalformedInput() throws {
        let object = try #require(FlatJSONObject.parse(Array(#"{"s":"a\"\u00e9\ud83d\ude00","i":-12,"f":1.5e3,"t":true,"n":null,"o":{"k":[1]}}"#.utf8)))
        #expect(object["s"] == .string("a\"é😀"))
        #expect(object["i"] == .integer(-12))
        #expect(object["f"] == .otherNumber("1.5e3"))
        #expect(object["t"] == .bool(true))
        #expect(object["n"] == .null)
        #expect(object["o"] == .nested)
        #expect(FlatJSONObject.parse(Array("{}".utf8)) == [:])
        for bad in ["", "[]", "{", #"{"a"}"#, #"{"a":01}"#, #"{"a":1,}"#, #"{"a":"\x"}"#, #"{"a":tru}"#,
                    #"{"a":1}{"#, #"{"a":"\ud83d"}"#, "{\"a\":\"\u{01}\"}", #"{"a":[}"#] {
            #expect(FlatJSONObject.parse(Array(bad.utf8)) == nil, "\(bad)")
        }
        #expect(FlatJSONObject.parse([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]) == nil)   // invalid UTF-8 name
    }
}
