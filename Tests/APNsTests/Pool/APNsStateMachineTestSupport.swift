import Synchronization
@testable import APNs

/// A deterministic jitter source: a SplitMix64 sequence mapped to `0..<1`.
func seededJitter(_ seed: UInt64) -> APNsJitterSource {
    let state = Atomic<UInt64>(seed)
    return APNsJitterSource {
        var z = state.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }
}

/// Jitter pinned to one value.
func fixedJitter(_ value: Double) -> APNsJitterSource {
    APNsJitterSource { value }
}

let millisecond: Int64 = 1_000_000
let second: Int64 = 1_000_000_000

/// A simulated instant: `seconds` after a fixed wall-clock origin.
func instant(nanoseconds: Int64) -> APNsInstant {
    APNsInstant(nanoseconds: nanoseconds, unixMilliseconds: 1_800_000_000_000 + nanoseconds / 1_000_000)
}

/// A notification with an optional absolute expiration (Unix seconds).
func pendingNotification(tag: UInt64, expiration: Int64? = nil) -> APNsPendingNotification {
    APNsPendingNotification(
        notification: APNsNotification(token: String(repeating: "ab", count: 32), expiration: expiration,
                                       topic: "com.example.app", payload: Array(#"{"aps":{}}"#.utf8)),
        tag: tag)
}
