import Bridge
import Testing

@Suite struct InvalidTokenEchoTests {
    @Test func shortStringsAreEchoedWhole() {
        let longestToken = String(repeating: "ab", count: 100)
        #expect(InvalidTokenEcho.echoed(longestToken) == longestToken)
        let atTheLimit = String(repeating: "z", count: InvalidTokenEcho.maximumBytes)
        #expect(InvalidTokenEcho.echoed(atTheLimit) == atTheLimit)
        #expect(InvalidTokenEcho.echoed("") == "")
    }

    @Test func longStringsAreCutOnACharacterBoundary() {
        let ascii = String(repeating: "q", count: 100_000)
        #expect(InvalidTokenEcho.echoed(ascii) == String(repeating: "q", count: InvalidTokenEcho.maximumBytes) + "…")
        // 255 ASCII bytes, then four-byte characters: the cut at byte 256 falls inside the first.
        let mixed = String(repeating: "a", count: InvalidTokenEcho.maximumBytes - 1) + String(repeating: "😀", count: 10)
        #expect(InvalidTokenEcho.echoed(mixed) == String(repeating: "a", count: InvalidTokenEcho.maximumBytes - 1) + "…")
        let emoji = String(repeating: "😀", count: 100)
        let cut = InvalidTokenEcho.echoed(emoji)
        #expect(cut == String(repeating: "😀", count: InvalidTokenEcho.maximumBytes / 4) + "…")
    }
}
