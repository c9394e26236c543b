import Kafka

/// Records the consumer polled and the pipeline has not admitted yet (consumer thread only).
///
/// Admission is decided per record after decoding, so a poll may return more records than there
/// is room for: the rest wait here, in order, instead of all being fanned out at once. Each
/// record keeps the partition progress it was polled under: if the partition is revoked before
/// its turn comes, the record is skipped (its new owner reads it again from the committed offset).
/// The poll size follows the largest fan-out seen lately (starting from the largest a request
/// may have, until records show otherwise) and the largest record, so few records, and few
/// bytes, wait here.
struct AdmissionQueue {
    struct Entry {
        var progress: PartitionProgress?
        var message: KafkaMessage
    }

    private var entries: [Entry] = []
    private var head = 0
    /// The largest work (tokens) one record caused in the recent past; at least 1.
    private var recentLargestWork: Int
    /// The largest record value seen lately, in bytes.
    private var recentLargestBytes = 0
    /// How many bytes of records a poll may bring in to wait here.
    static let waitingByteBudget = 8 * 1024 * 1024

    /// - Parameter largestWork: the most work one record may cause (`max_tokens_per_request`):
    ///   until records show otherwise, polls assume every record is that large.
    init(largestWork: Int) {
        recentLargestWork = max(1, largestWork)
    }

    /// Whether every polled record was admitted.
    var isEmpty: Bool { head == entries.count }

    /// Records waiting.
    var count: Int { entries.count - head }

    /// How many records to poll with `room` units of in-flight work free: enough to fill it if
    /// records are as large as the largest seen lately, at least 1 and at most 1000.
    func pollSize(room: Int) -> Int {
        let byBytes = recentLargestBytes > 0 ? AdmissionQueue.waitingByteBudget / recentLargestBytes : 1000
        return max(1, min(1000, room / recentLargestWork, byBytes))
    }

    /// Adds a polled record with its partition's progress when it was polled.
    mutating func append(_ message: KafkaMessage, progress: PartitionProgress?) {
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        }
        noteRecordBytes(message.value?.count ?? 0)
        entries.append(Entry(progress: progress, message: message))
    }

    /// Learns from one polled record's size (whether it waits here or was admitted at once):
    /// grows at once, shrinks slowly.
    mutating func noteRecordBytes(_ bytes: Int) {
        if bytes > recentLargestBytes {
            recentLargestBytes = bytes
        } else if recentLargestBytes > 0 {
            recentLargestBytes -= (recentLargestBytes - bytes) / 64
        }
    }

    /// The oldest waiting record, moved out (its slot keeps an empty record, so its bytes are
    /// freed with it, not with the queue).
    mutating func popFirst() -> Entry? {
        guard head < entries.count else { return nil }
        var entry = Entry(progress: nil, message: AdmissionQueue.emptyMessage)
        swap(&entry, &entries[head])
        head += 1
        return entry
    }

    /// Learns from one admitted record's work: grows at once, shrinks slowly.
    mutating func recordWork(_ work: Int) {
        if work > recentLargestWork {
            recentLargestWork = work
        } else if recentLargestWork > 1 {
            recentLargestWork -= max(1, (recentLargestWork - work) / 64)
        }
    }

    private static let emptyMessage = KafkaMessage(
        topic: "", partition: 0, offset: 0, key: nil, value: nil, headers: [], timestampMilliseconds: nil)
}
