import JSON
import Testing

@Suite struct JSONObjectTests {
    @Test func objectsWithDuplicateOrMalformedMembersAreRejected() {
        #expect(JSONScanner.parseObjectWithUniqueMembers(Array(#"{"alg":"ES256","kid":"ABC123DEFG"}"#.utf8)) != nil)
        for bad in [#"{"alg":"none","alg":"ES256"}"#, "[]", "{", #"{"a":1}{"#, #"{"a":"\ud83d"}"#] {
            #expect(JSONScanner.parseObjectWithUniqueMembers(Array(bad.utf8)) == nil, "\(bad)")
        }
        #expect(JSONScanner.parseObjectWithUniqueMembers([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]) == nil)   // invalid UTF-8 name
    }
}
