import Bridge
/// How many partitions a topic of librdkafka 2.0.2's mock cluster needs so that none loses
/// records: the mock keeps at most 5 MB or 100,000 records per partition and silently drops the
/// oldest beyond that. Planned with headroom (60 % of either limit) because keys hash unevenly.
public enum MockPartitionBudget {
    /// Bytes a mock partition keeps before dropping its oldest records.
    public static let partitionBytes = 5 * 1024 * 1024
    /// Records a mock partition keeps before dropping its oldest records.
    public static let partitionRecords = 100_000
    /// The share of either limit a plan may use.
    public static let headroom = 0.6
    /// Per-record bytes on top of key and value in a record batch (length, deltas, header count,
    /// plus a share of the batch header), estimated generously.
    public static let recordOverheadBytes = 40

    /// The fewest partitions that keep `records` records of about `bytesPerRecord` bytes
    /// (key, value and headers) within the budget.
    public static func partitionsNeeded(records: Int, bytesPerRecord: Int) -> Int {
        let bytes = Double(records) * Double(bytesPerRecord + recordOverheadBytes)
        let bySize = (bytes / (Double(partitionBytes) * headroom)).rounded(.up)
        let byCount = (Double(records) / (Double(partitionRecords) * headroom)).rounded(.up)
        return max(1, Int(max(bySize, byCount)))
    }
}
