import Testing

@Test func placeholderBridgeTests() { #expect(Bool(true)) }
