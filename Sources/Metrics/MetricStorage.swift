import Synchronization

/// The value of one counter series: a relaxed atomic, so an increment costs one atomic add.
final class CounterStorage: Sendable {
    let value = Atomic<UInt64>(0)
}

/// The value of one gauge series: a `Double` kept as its bit pattern in an atomic.
final class GaugeStorage: Sendable {
    let bits = Atomic<UInt64>(0.0.bitPattern)

    var value: Double { Double(bitPattern: bits.load(ordering: .relaxed)) }

    func set(_ value: Double) {
        bits.store(value.bitPattern, ordering: .relaxed)
    }

    func add(_ delta: Double) {
        var current = bits.load(ordering: .relaxed)
        while true {
            let next = (Double(bitPattern: current) + delta).bitPattern
            let (exchanged, original) = bits.compareExchange(
                expected: current, desired: next, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}

/// The buckets of one histogram series.
///
/// Each observation costs two relaxed atomic operations: one add on the (non-cumulative) count of
/// the bucket it falls in, one compare-and-exchange on the sum. The cumulative counts, the total
/// count and `+Inf` are computed when the series is read, so a scrape never sees a bucket count
/// larger than the total.
final class HistogramStorage: @unchecked Sendable {
    /// Upper bounds, ascending, without `+Inf`.
    let upperBounds: [Double]
    /// `upperBounds.count + 1` counters; the last one counts observations above every bound.
    private let counts: UnsafeMutablePointer<Atomic<UInt64>>
    private let sumBits = Atomic<UInt64>(0.0.bitPattern)

    init(upperBounds: [Double]) {
        self.upperBounds = upperBounds
        counts = .allocate(capacity: upperBounds.count + 1)
        for index in 0...upperBounds.count {
            (counts + index).initialize(to: Atomic(0))
        }
    }

    deinit {
        counts.deinitialize(count: upperBounds.count + 1)
        counts.deallocate()
    }

    func observe(_ value: Double) {
        var index = 0
        let bounds = upperBounds
        // Linear: a dozen or two bounds, and most APNs answers land in the first few.
        while index < bounds.count, value > bounds[index] { index += 1 }
        counts[index].add(1, ordering: .relaxed)
        var current = sumBits.load(ordering: .relaxed)
        while true {
            let next = (Double(bitPattern: current) + value).bitPattern
            let (exchanged, original) = sumBits.compareExchange(expected: current, desired: next, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Cumulative counts per bound (the last is `+Inf`, the total) and the sum.
    func snapshot() -> (cumulative: [UInt64], sum: Double) {
        var cumulative: [UInt64] = []
        cumulative.reserveCapacity(upperBounds.count + 1)
        var running: UInt64 = 0
        for index in 0...upperBounds.count {
            running &+= counts[index].load(ordering: .relaxed)
            cumulative.append(running)
        }
        return (cumulative, Double(bitPattern: sumBits.load(ordering: .relaxed)))
    }
}
