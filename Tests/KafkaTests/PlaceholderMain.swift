import Testing

@Test func placeholderKafkaTestsMain() { #expect(Bool(true)) }
