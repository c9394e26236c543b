import Testing
@testable import APNsSimulator

@Suite struct SimulatorUUIDGeneratorTests {
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
}
