import Testing
@testable import APNs

@Suite struct Base64URLTests {
    @Test func encodesRFC4648VectorsWithoutPadding() {
        let vectors: [(String, String)] = [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func usesTheURLAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test func roundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }

    @Test func rejectsMalformedInput() {
        #expect(Base64URL.decode("Zm9v=") == nil)       // padding
        #expect(Base64URL.decode("Zm+v") == nil)        // standard alphabet
        #expect(Base64URL.decode("Z") == nil)           // impossible length
        #expect(Base64URL.decode("Zh") == nil)          // non-zero trailing bits
        #expect(Base64URL.decode("Zm 9") == nil)
    }
}
