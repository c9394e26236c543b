import Testing
@testable import HTTP2

/// The discard cap is a share of each window refill, not a total over a connection's life
/// (`HostilePeerTests` proves the wiring: a peer ignoring resets is cut off).
@Suite struct DiscardedDataMeterTests {
    static let refill = 8 << 20

    @Test func theFirstWindowUpdateOnlyRaisesTheWindow() {
        var meter = DiscardedDataMeter(limit: 4 << 20)
        #expect(meter.refilled(Int(HTTP2Session.connectionWindowSize)) == nil)
        #expect(meter.refilled(Self.refill) == Self.refill)  // nothing kept of a whole refill
    }

    /// Late answers to timed-out streams over days: a little of every refill, far more than the
    /// limit in all.
    @Test func aLittleWasteInEveryRefillNeverReachesTheCap() {
        var meter = DiscardedDataMeter(limit: 4 << 20)
        _ = meter.refilled(Int(HTTP2Session.connectionWindowSize))
        for _ in 0..<1000 {
            meter.kept(Self.refill - (1 << 20))
            #expect(meter.refilled(Self.refill) == nil)
        }
    }

    @Test func moreThanTheLimitOfOneRefillIsReported() {
        var meter = DiscardedDataMeter(limit: 4 << 20)
        _ = meter.refilled(Int(HTTP2Session.connectionWindowSize))
        meter.kept(Self.refill - (4 << 20))
        #expect(meter.refilled(Self.refill) == nil)  // exactly the limit
        meter.kept(Self.refill - (4 << 20) - 1)
        #expect(meter.refilled(Self.refill) == (4 << 20) + 1)
        // What was kept before counts for its own refill only.
        #expect(meter.refilled(Self.refill) == Self.refill)
    }
}
