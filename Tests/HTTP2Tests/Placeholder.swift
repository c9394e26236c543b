import Testing

@Test func placeholderHTTP2Tests() { #expect(Bool(true)) }
