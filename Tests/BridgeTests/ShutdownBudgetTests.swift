@testable import Bridge
import Testing

/// How `shutdown_timeout` is split between waiting for APNs and closing the Kafka clients.
@Suite struct ShutdownBudgetTests {
    @Test func theClosingReserveIsATenthBetweenOneSecondAndAQuarter() {
        let second: UInt64 = 1_000_000_000
        #expect(BridgePipeline.closingReserveNanoseconds(of: 30 * second) == 3 * second)
        #expect(BridgePipeline.closingReserveNanoseconds(of: 10 * second) == second)
        #expect(BridgePipeline.closingReserveNanoseconds(of: 2 * second) == second / 2)
        #expect(BridgePipeline.closingReserveNanoseconds(of: 100 * second) == 10 * second)
        #expect(BridgePipeline.closingReserveNanoseconds(of: 0) == 0)
    }
}
