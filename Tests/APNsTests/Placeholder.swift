import Testing

@Test func placeholderAPNsTests() { #expect(Bool(true)) }
