import Testing

@Test func placeholderHTTP2TestsMain() { #expect(Bool(true)) }
