@testable import BridgeLocal
import Testing
import TestSupport

/// Ports for child processes come from below the kernel's ephemeral range, free when chosen.
@Suite struct LoopbackPortTests {
    @Test func aPortIsChosenBelowTheEphemeralRangeAndIsFree() throws {
        let rangeStart = LoopbackPort.ephemeralRangeStart()
        try #require(rangeStart > LoopbackPort.lowest, "this machine's ephemeral range starts at \(rangeStart)")
        for _ in 0..<20 {
            let port = try LoopbackPort.unused()
            #expect((LoopbackPort.lowest..<rangeStart).contains(port))
            #expect(LoopbackPort.bindable(port) == port)
        }
    }

    @Test func aPortSomeoneHoldsIsNotBindable() throws {
        let reservation = try PortReservation()
        defer { reservation.release() }
        #expect(LoopbackPort.bindable(reservation.port) == nil)
        #expect(LoopbackPort.bindable(0) != nil)
    }
}
