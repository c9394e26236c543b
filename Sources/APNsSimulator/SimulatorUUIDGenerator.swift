import Synchronization

/// Generates random-looking lowercase UUID v4 strings quickly and without Foundation: a random seed
/// mixed with an atomic counter through SplitMix64 (unique per process, not cryptographic; the
/// simulator only needs distinct `apns-id`s).
final class SimulatorUUIDGenerator: Sendable {
    private let seed: UInt64
    private let counter = Atomic<UInt64>(0)

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    init() {
        var generator = SystemRandomNumberGenerator()
        seed = generator.next()
    }

    /// The next UUID, e.g. `0e9c4a5e-7f1b-4c3d-9a2e-1b2c3d4e5f60`.
    func next() -> String {
        let index = counter.add(1, ordering: .relaxed).newValue
        var high = Self.mix(seed &+ index &* 2)
        var low = Self.mix(seed &+ index &* 2 &+ 1)
        high = (high & ~0xF000) | 0x4000                       // version 4
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000   // RFC 4122 variant
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (position, word) in [(0, high), (16, low)] {
            for nibbleIndex in 0..<16 {
                let hexPosition = position + nibbleIndex
                if hexPosition == 8 || hexPosition == 12 || hexPosition == 16 || hexPosition == 20 {
                    text.append(UInt8(ascii: "-"))
                }
                let nibble = Int((word >> UInt64(60 - nibbleIndex * 4)) & 0xF)
                text.append(Self.hexDigits[nibble])
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// SplitMix64's finaliser: a bijective 64-bit mix.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
