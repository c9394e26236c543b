/// Decides which partitions the uncommitted-span bound pauses and which it resumes
/// (``BridgePipeline/boundUncommittedSpans()``), from what each partition holds behind an
/// unfinished record, the partitions already paused and the time.
///
/// The partitions together may hold `bound`. When those not paused hold more (at least once:
/// all of them), each one holding at least its share of the bound (the bound over the
/// partitions) is paused once it has done so for `graceNanoseconds` without a break. A paused
/// partition resumes once all of them together hold half the bound or less, or it holds half its
/// share or less.
///
/// The grace tells a stuck record from a slow one. Exactly once, a record APNs answers late holds
/// the outputs completing behind it for as long; pausing its partition at once, then resuming it
/// moments later, costs librdkafka's prefetched records for nothing. A record that cannot finish
/// holds them past the grace. At least once the bound is on memory, and the grace is zero.
struct UncommittedSpanBound<Partition: Hashable> {
    /// What the partitions together may hold.
    let bound: Int
    /// How long a partition holds its share or more before it is paused.
    let graceNanoseconds: UInt64
    /// Whether what paused partitions hold is left out of the sum that triggers a pause (exactly
    /// once: their pause bounds it, and counted it would keep the sum over the bound, so that
    /// every brief hold of the others' would pause them again and again).
    let pausedPartitionsLeaveTheSum: Bool
    /// Since when (nanoseconds) each partition not paused yet has held its share or more.
    private(set) var overSince: [Partition: UInt64] = [:]

    /// What to do with the partitions.
    struct Decision {
        /// Partitions to pause, with what each holds.
        var pause: [(partition: Partition, span: Int)] = []
        /// Paused partitions to resume.
        var resume: [Partition] = []
    }

    /// Partitions leaving the assignment: assigned again, their grace starts anew.
    mutating func forget(_ partitions: some Sequence<Partition>) {
        for partition in partitions { overSince.removeValue(forKey: partition) }
    }

    /// The decision for what the assigned partitions hold (`spans`), those `paused` by this bound
    /// and the time `now` in nanoseconds. Partitions missing from `spans` (revoked) are forgotten.
    mutating func decide(spans: [Partition: Int], paused: Set<Partition>, now: UInt64) -> Decision {
        let total = spans.values.reduce(0, +)
        let sum = pausedPartitionsLeaveTheSum ? spans.filter { !paused.contains($0.key) }.values.reduce(0, +) : total
        let share = max(1, bound / max(1, spans.count))
        var decision = Decision()
        var stillOver: [Partition: UInt64] = [:]
        for (partition, span) in spans {
            if paused.contains(partition) {
                if total <= bound / 2 || span <= share / 2 { decision.resume.append(partition) }
            } else if sum > bound, span >= share {
                let since = overSince[partition] ?? now
                if now &- since >= graceNanoseconds {
                    decision.pause.append((partition, span))
                } else {
                    stillOver[partition] = since
                }
            }
        }
        overSince = stillOver
        return decision
    }
}
