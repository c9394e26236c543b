import Testing
@testable import APNs

@Suite struct APNsInFlightTableTests {
    private func flight(_ tag: UInt64) -> APNsConnectionPool.InFlight {
        APNsConnectionPool.InFlight(entry: APNsDeliveryStateMachine.Entry(pendingNotification(tag: tag)),
                                    sentAt: Int64(tag), tokenGeneration: nil)
    }

    @Test func eachTagFindsItsNotificationOnceAndNoTagIsZero() {
        var table = APNsInFlightTable()
        let tags = (0..<100).map { table.insert(flight($0)) }
        #expect(Set(tags).count == 100)
        #expect(!tags.contains(0))
        #expect(table.count == 100)
        for (index, tag) in tags.enumerated().reversed() {
            #expect(table.remove(tag: tag)?.entry.pending.tag == UInt64(index))
            #expect(table.remove(tag: tag) == nil)
        }
        #expect(table.count == 0)
    }

    @Test func aFreedSlotIsReusedAndItsOldTagFindsNothing() {
        var table = APNsInFlightTable()
        let announced = table.nextTag
        let first = table.insert(flight(1))
        #expect(first == announced)
        #expect(table.remove(tag: first)?.sentAt == 1)
        let announcedAgain = table.nextTag
        let second = table.insert(flight(2))
        #expect(second == announcedAgain)
        #expect(second & 0xffff_ffff == first & 0xffff_ffff)  // the same slot
        #expect(second != first)
        #expect(table.remove(tag: first) == nil)
        #expect(table.remove(tag: second)?.sentAt == 2)
    }

    @Test func tagsOfNoSlotFindNothing() {
        var table = APNsInFlightTable()
        _ = table.insert(flight(1))
        #expect(table.remove(tag: 0) == nil)
        #expect(table.remove(tag: 1 << 32 | 7) == nil)
        #expect(table.remove(tag: .max) == nil)
        #expect(table.count == 1)
    }

    @Test func aStandingWindowKeepsTheTableAtItsPeak() {
        var table = APNsInFlightTable()
        var open: [UInt64] = []
        for index in 0..<100_000 {
            open.append(table.insert(flight(UInt64(index))))
            if open.count > 1_000 {
                #expect(table.remove(tag: open.removeFirst()) != nil)
            }
        }
        #expect(table.count == 1_000)
        #expect(table.slotCount <= 1_001)
    }
}
