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
        // Static names take no bytes of the block: only the values count.
        var byteCapacity = HeaderBlock.size("/3/device/") + HeaderBlock.size("abc")
        for value in values { byteCapacity += HeaderBlock.decimalSize(value) }
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

    @Test func staticNamesAreLentToNghttp2AndRunTimeNamesAreCopied() {
        let staticName: StaticString = "apns-topic"
        let runTimeName = String(["apns", "collapse", "id"].joined(separator: "-"))
        let capacity = HeaderBlock.size("com.example.chat") + HeaderBlock.size(runTimeName) + HeaderBlock.size("c1")
        let (remaining, fields, copiedName) = HeaderBlock.with(fieldCount: 2, byteCapacity: capacity) { block in
            block.add(staticName, "com.example.chat")
            block.add(copyingName: runTimeName, "c1")
            let fields = Array(UnsafeBufferPointer(start: block.nameValues, count: block.count))
            // The block's bytes are gone after `with` returns: read the copied name inside it.
            let copiedName = String(decoding: UnsafeBufferPointer(start: fields[1].name, count: fields[1].namelen),
                                    as: UTF8.self)
            return (block.remainingCapacity, fields, copiedName)
        }
        #expect(remaining == 0)
        // The static name: nghttp2 is given the binary's own bytes and told not to copy them.
        #expect(UnsafeRawPointer(fields[0].name) == UnsafeRawPointer(staticName.utf8Start))
        #expect(fields[0].flags == UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue))
        // The run-time name: copied into the block, and copied again by nghttp2 on submit.
        #expect(UnsafeRawPointer(fields[1].name) != UnsafeRawPointer(staticName.utf8Start))
        #expect(fields[1].flags == UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
        #expect(copiedName == "apns-collapse-id")
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
