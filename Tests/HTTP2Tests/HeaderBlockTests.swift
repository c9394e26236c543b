import CNGHTTP2
@testable import HTTP2
import Testing

/// The scratch header block: sized from exactly what is written, and refusing to write past it.
@Suite struct HeaderBlockTests {
    @Test func requestHeadersFillTheirScratchMemoryExactly() {
        let request = HTTP2Request(
            path: "/3/device/" + String(repeating: "ab", count: 32),
            headers: [("apns-topic", "com.example.chat"), ("apns-push-type", "alert"), ("authorization", "bearer x.y.z")],
            body: Array("{}".utf8)
        )
        let (remaining, count, names) = HeaderBlock.withRequestHeaders(authority: "api.push.apple.com:443", request: request) { block in
            let fields = UnsafeBufferPointer(start: block.nameValues, count: block.count)
            let names = fields.map { String(decoding: UnsafeBufferPointer(start: $0.name, count: $0.namelen), as: UTF8.self) }
            return (block.remainingCapacity, block.count, names)
        }
        #expect(remaining == 0)
        #expect(count == 7)
        #expect(names == [":method", ":scheme", ":authority", ":path", "apns-topic", "apns-push-type", "authorization"])
    }

    @Test func decimalAndPrefixedValuesAreWrittenWithoutStrings() {
        let values: [Int64] = [0, 5, 10, 99, 100, -1, -42, 1_700_000_000, .max, .min]
        var byteCapacity = HeaderBlock.size(":path") + HeaderBlock.size("/3/device/") + HeaderBlock.size("abc")
        for value in values { byteCapacity += HeaderBlock.size("n") + HeaderBlock.decimalSize(value) }
        let (remaining, fields) = HeaderBlock.with(fieldCount: 1 + values.count, byteCapacity: byteCapacity) { block in
            block.add(":path", "/3/device/", "abc")
            for value in values { block.add("n", decimal: value) }
            let fields = UnsafeBufferPointer(start: block.nameValues, count: block.count).map {
                String(decoding: UnsafeBufferPointer(start: $0.name, count: $0.namelen), as: UTF8.self) + "=" +
                    String(decoding: UnsafeBufferPointer(start: $0.value, count: $0.valuelen), as: UTF8.self)
            }
            return (block.remainingCapacity, fields)
        }
        #expect(remaining == 0)  // decimalSize is exact
        #expect(fields == [":path=/3/device/abc"] + values.map { "n=\($0)" })
    }

    @Test func writingPastTheCapacityTraps() async {
        await #expect(processExitsWith: .failure) {
            HeaderBlock.with(fieldCount: 1, byteCapacity: 8) { block in
                block.add(":authority", "example.com")
            }
        }
    }

    @Test func moreFieldsThanSizedForTraps() async {
        await #expect(processExitsWith: .failure) {
            HeaderBlock.with(fieldCount: 1, byteCapacity: 64) { block in
                block.add("a", "1")
                block.add("b", "2")
            }
        }
    }
}
