import Testing

@Test func placeholderKafkaTests() { #expect(Bool(true)) }
