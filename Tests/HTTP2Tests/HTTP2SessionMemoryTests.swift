import CNGHTTP2
@testable import HTTP2
import Testing
import TestSupport

/// The client session's allocator: its size classes, reuse, zeroing, resizing and cap by
/// direct calls, and a real connection over TLS whose nghttp2 session allocates through it.
@Suite struct HTTP2SessionMemoryTests {
    @Test func sizesFallIntoPowerOfTwoClassesUpToTwoKilobytes() {
        #expect(HTTP2SessionMemory.sizeClass(of: 0) == 0)
        #expect(HTTP2SessionMemory.sizeClass(of: 1) == 0)
        #expect(HTTP2SessionMemory.sizeClass(of: 64) == 0)
        #expect(HTTP2SessionMemory.sizeClass(of: 65) == 1)
        #expect(HTTP2SessionMemory.sizeClass(of: 128) == 1)
        #expect(HTTP2SessionMemory.sizeClass(of: 1024) == 4)
        #expect(HTTP2SessionMemory.sizeClass(of: 2048) == 5)
        #expect(HTTP2SessionMemory.sizeClass(of: 2049) == nil)
        #expect(HTTP2SessionMemory.sizeClass(of: .max) == nil)
        for size in [1, 63, 64, 65, 500, 2047, 2048] {
            let sizeClass = HTTP2SessionMemory.sizeClass(of: size)!
            #expect(HTTP2SessionMemory.capacity(ofClass: sizeClass) >= size)
            #expect(sizeClass == 0 || HTTP2SessionMemory.capacity(ofClass: sizeClass - 1) < size)
        }
    }

    @Test func aFreedBlockServesTheNextRequestOfItsClassAndIsZeroedWhenCallocAsksForIt() throws {
        let memory = HTTP2SessionMemory()
        let mem = memory.nghttp2Memory
        let first = try #require(mem.malloc(200, mem.mem_user_data))
        #expect(Int(bitPattern: first) % 16 == 0)
        first.initializeMemory(as: UInt8.self, repeating: 0xAB, count: 200)
        mem.free(first, mem.mem_user_data)
        #expect(memory.cachedBytes == HTTP2SessionMemory.headerBytes + 256)

        let second = try #require(mem.calloc(10, 25, mem.mem_user_data))
        #expect(second == first)
        #expect(UnsafeRawBufferPointer(start: second, count: 250).allSatisfy { $0 == 0 })
        #expect(memory.cachedBytes == 0)
        #expect(memory.allocations == 2)
        #expect(memory.allocationsFromMalloc == 1)

        let large = try #require(mem.malloc(100_000, mem.mem_user_data))
        mem.free(large, mem.mem_user_data)
        #expect(memory.cachedBytes == 0, "blocks larger than every class go straight back")
        mem.free(second, mem.mem_user_data)
        mem.free(nil, mem.mem_user_data)
        #expect(memory.blocksInUse == 0)
        #expect(mem.calloc(Int.max, 2, mem.mem_user_data) == nil, "an overflowing calloc fails")
        #expect(mem.malloc(-1, mem.mem_user_data) == nil, "a size_t of 2^63 or more is no block")
        withExtendedLifetime(memory) {}  // the lists behind `mem` live until here
    }

    @Test func resizingKeepsTheContentsWithinAClassAcrossClassesAndBeyondThem() throws {
        let memory = HTTP2SessionMemory()
        let mem = memory.nghttp2Memory
        let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var block = try #require(mem.realloc(nil, 40, mem.mem_user_data))
        block.copyMemory(from: bytes, byteCount: 40)

        let same = try #require(mem.realloc(block, 60, mem.mem_user_data))
        #expect(same == block, "a size the block's class holds keeps the block")
        block = try #require(mem.realloc(same, 1500, mem.mem_user_data))
        #expect(Array(UnsafeRawBufferPointer(start: block, count: 40)) == Array(bytes[0..<40]))
        block.copyMemory(from: bytes, byteCount: 1500)
        block = try #require(mem.realloc(block, 4000, mem.mem_user_data))
        #expect(Array(UnsafeRawBufferPointer(start: block, count: 1500)) == Array(bytes[0..<1500]))
        block.copyMemory(from: bytes, byteCount: 4000)
        block = try #require(mem.realloc(block, 5000, mem.mem_user_data))
        #expect(Array(UnsafeRawBufferPointer(start: block, count: 4000)) == Array(bytes[0..<4000]))
        block = try #require(mem.realloc(block, 100, mem.mem_user_data))
        #expect(Array(UnsafeRawBufferPointer(start: block, count: 100)) == Array(bytes[0..<100]))
        #expect(mem.realloc(block, -1, mem.mem_user_data) == nil, "a size_t of 2^63 or more is no block")
        #expect(Array(UnsafeRawBufferPointer(start: block, count: 100)) == Array(bytes[0..<100]), "the block stays as it was")
        mem.free(block, mem.mem_user_data)
        #expect(memory.blocksInUse == 0)
        #expect(memory.cachedBytes > 0)
        memory.releaseCachedBlocks()
        #expect(memory.cachedBytes == 0)
    }

    @Test func theFreeListsNeverHoldMoreThanTheirCap() throws {
        let memory = HTTP2SessionMemory()
        let mem = memory.nghttp2Memory
        let blockBytes = HTTP2SessionMemory.headerBytes + 2048
        let count = HTTP2SessionMemory.maxCachedBytes / blockBytes + 100
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<count { blocks.append(try #require(mem.malloc(2000, mem.mem_user_data))) }
        for block in blocks { mem.free(block, mem.mem_user_data) }
        #expect(memory.cachedBytes <= HTTP2SessionMemory.maxCachedBytes)
        #expect(memory.cachedBytes > HTTP2SessionMemory.maxCachedBytes - blockBytes)
        #expect(memory.blocksInUse == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func aConnectionsSessionTakesItsBlocksFromItsListsAndGivesThemBackWhenItCloses() async throws {
        let pair = try ClientServerPair(maxConcurrentStreams: 100)
        defer { pair.tearDown() }
        let client = pair.client
        _ = try await client.sendEchoRequests(3000)
        let connection = client.connection
        let counts = await onLoop(client.loop) {
            let memory = connection.sessionMemory
            return (memory.allocations, memory.allocationsFromMalloc, memory.cachedBytes, memory.blocksInUse)
        }
        // nghttp2 allocates several blocks per stream (stream, queued frames, header copies);
        // after the first hundred streams they come back from the free lists.
        #expect(counts.0 >= 3 * 3000)
        #expect(counts.1 * 10 <= counts.0, "\(counts.1) of \(counts.0) allocations went to malloc")
        #expect(counts.2 > 0)
        #expect(counts.3 > 0, "the live session holds blocks")
        client.loop.execute { connection.close() }
        #expect(await eventually { client.delegate.closeReason != nil })
        // Deleting the session gave every block back, and the lists were emptied.
        let after = await onLoop(client.loop) { (connection.sessionMemory.blocksInUse, connection.sessionMemory.cachedBytes) }
        #expect(after.0 == 0)
        #expect(after.1 == 0)
        try await client.stop()
    }
}
