import CNGHTTP2
#if canImport(Glibc)
import Glibc
#endif

/// The allocator of one client connection's nghttp2 session: free lists of nghttp2's small
/// blocks, so that the stream, the queued frame, the request's header list copy and the answer's
/// header buffers each request and answer need come back from the connection's own lists rather
/// than from `malloc` and `free` (about six of each per request).
///
/// Blocks come from `malloc` in six size classes (64 to 2,048 bytes; larger ones are `malloc`ed
/// and freed as asked), with a 16-byte header naming the class, so a block stays 16-byte aligned.
/// A freed block goes onto its class's list when it fits under `maxCachedBytes`, else back to
/// `free`: the lists never hold more than nghttp2 held at once, and never more than
/// `maxCachedBytes`. Every cached block is freed when the allocator goes. (AddressSanitizer
/// sees the `malloc`ed blocks whole: an access past what nghttp2 asked for but inside its
/// class's block, or to a block resting on a list, is not reported. A block freed a second
/// time before its class hands it out again stops the process: see `release`.)
///
/// Not thread-safe, by design: the session is driven on its connection's loop thread only (and
/// deleted there, or in the connection's `deinit` when nothing else holds it). It must outlive
/// the session: `nghttp2_session_del` frees through it.
package final class HTTP2SessionMemory {
    /// What the free lists keep at most, in bytes of blocks (headers included).
    static let maxCachedBytes = 4 << 20

    /// The payload sizes of the classes: 64 << class.
    static let classCount = 6
    static let smallestClassShift = 6
    static let headerBytes = 16
    /// Marks a block's header, so that a pointer nghttp2 did not get from here is caught.
    static let magic: UInt32 = 0x6E67_6832
    /// The class number of a block that was `malloc`ed at its own size.
    static let unpooledClass: UInt32 = .max

    /// The free lists' heads (one word per class), then the bytes they hold, the blocks handed
    /// out, those `malloc` served and the blocks given back (one word each), behind the one
    /// pointer that nghttp2 carries as its `mem_user_data`.
    private let lists: UnsafeMutableRawPointer
    private static let cachedBytesOffset = classCount * MemoryLayout<Int>.stride
    private static let allocationsOffset = cachedBytesOffset + MemoryLayout<Int>.stride
    private static let mallocsOffset = allocationsOffset + MemoryLayout<Int>.stride
    private static let releasesOffset = mallocsOffset + MemoryLayout<Int>.stride

    init() {
        let size = (Self.classCount + 4) * MemoryLayout<Int>.stride
        lists = .allocate(byteCount: size, alignment: MemoryLayout<Int>.alignment)
        lists.initializeMemory(as: UInt8.self, repeating: 0, count: size)
    }

    deinit {
        releaseCachedBlocks()
        lists.deallocate()
    }

    /// The bytes the free lists hold now.
    var cachedBytes: Int { Self.cachedBytes(lists) }
    /// The blocks handed to nghttp2 so far (by `malloc`, `calloc`, and a `realloc` that moved
    /// the block to another class; a large block resized in place by the C library counts once).
    var allocations: Int { lists.load(fromByteOffset: Self.allocationsOffset, as: Int.self) }
    /// How many of those `malloc` served, the rest coming from the free lists.
    var allocationsFromMalloc: Int { lists.load(fromByteOffset: Self.mallocsOffset, as: Int.self) }
    /// The blocks nghttp2 holds now: handed out and not given back.
    var blocksInUse: Int { allocations - lists.load(fromByteOffset: Self.releasesOffset, as: Int.self) }

    /// Frees every cached block (the session is gone, or memory is wanted back).
    func releaseCachedBlocks() {
        for sizeClass in 0..<Self.classCount {
            while let block = Self.pop(lists, sizeClass) { free(block) }
        }
        Self.setCachedBytes(lists, 0)
    }

    /// The allocator in nghttp2's terms, for `nghttp2_session_client_new3`. nghttp2 copies the
    /// struct; the pointer inside stays valid as long as this object.
    var nghttp2Memory: nghttp2_mem {
        nghttp2_mem(mem_user_data: lists,
                    malloc: { size, lists in HTTP2SessionMemory.allocate(size, lists) },
                    free: { pointer, lists in HTTP2SessionMemory.release(pointer, lists) },
                    calloc: { count, size, lists in HTTP2SessionMemory.allocateZeroed(count, size, lists) },
                    realloc: { pointer, size, lists in HTTP2SessionMemory.reallocate(pointer, size, lists) })
    }

    // MARK: - The four calls nghttp2 makes

    /// The class whose blocks hold `size` bytes, or nil when the size is larger than every class.
    @inline(__always)
    static func sizeClass(of size: Int) -> Int? {
        guard size > 1 << smallestClassShift else { return 0 }
        let shift = Int.bitWidth &- (size &- 1).leadingZeroBitCount &- smallestClassShift
        return shift < classCount ? shift : nil
    }

    @inline(__always)
    static func capacity(ofClass sizeClass: Int) -> Int { 1 &<< (sizeClass &+ smallestClassShift) }

    static func allocate(_ size: Int, _ userData: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        // `size_t` arrives as `Int`: a size of 2^63 or more is negative here, and no block.
        guard let lists = userData, size >= 0 else { return nil }
        count(lists, at: allocationsOffset)
        guard let sizeClass = sizeClass(of: size) else { return allocateUnpooled(size, lists) }
        let block: UnsafeMutableRawPointer
        if let cached = pop(lists, sizeClass) {
            setCachedBytes(lists, cachedBytes(lists) &- headerBytes &- capacity(ofClass: sizeClass))
            block = cached
        } else {
            guard let fresh = malloc(headerBytes &+ capacity(ofClass: sizeClass)) else { return nil }
            count(lists, at: mallocsOffset)
            block = fresh
        }
        block.storeBytes(of: UInt64(magic) | UInt64(truncatingIfNeeded: sizeClass) << 32, as: UInt64.self)
        return block + headerBytes
    }

    /// A block larger than every class, `malloc`ed at its own size.
    private static func allocateUnpooled(_ size: Int, _ lists: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        guard size <= Int.max - headerBytes, let block = malloc(headerBytes + size) else { return nil }
        count(lists, at: mallocsOffset)
        block.storeBytes(of: UInt64(magic) | UInt64(unpooledClass) << 32, as: UInt64.self)
        return block + headerBytes
    }

    static func release(_ pointer: UnsafeMutableRawPointer?, _ userData: UnsafeMutableRawPointer?) {
        guard let pointer, let lists = userData else { return }
        let block = pointer - headerBytes
        let header = block.load(as: UInt64.self)
        // invariant: nghttp2 frees only what this allocator gave it, once; anything else would
        // be memory corruption that must not go on silently.
        precondition(UInt32(truncatingIfNeeded: header) == magic, "nghttp2 freed a block it did not get from its allocator")
        block.storeBytes(of: 0, as: UInt64.self)  // a second free of the block is caught above
        count(lists, at: releasesOffset)
        let sizeClass = Int(header >> 32)
        guard sizeClass < classCount else { return free(block) }
        let bytes = headerBytes &+ capacity(ofClass: sizeClass)
        let cached = cachedBytes(lists) &+ bytes
        guard cached <= maxCachedBytes else { return free(block) }
        setCachedBytes(lists, cached)
        push(lists, sizeClass, block)
    }

    static func allocateZeroed(_ count: Int, _ size: Int,
                               _ userData: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        let (total, overflow) = count.multipliedReportingOverflow(by: size)
        guard !overflow, let pointer = allocate(total, userData) else { return nil }
        pointer.initializeMemory(as: UInt8.self, repeating: 0, count: total)
        return pointer
    }

    static func reallocate(_ pointer: UnsafeMutableRawPointer?, _ size: Int,
                           _ userData: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(size, userData) }
        guard size >= 0 else { return nil }
        let block = pointer - headerBytes
        let header = block.load(as: UInt64.self)
        precondition(UInt32(truncatingIfNeeded: header) == magic, "nghttp2 resized a block it did not get from its allocator")
        let sizeClass = UInt32(truncatingIfNeeded: header >> 32)
        if sizeClass != unpooledClass, size <= capacity(ofClass: Int(sizeClass)) { return pointer }
        if sizeClass == unpooledClass, Self.sizeClass(of: size) == nil {
            // Large to large: the C library may grow the block in place.
            guard size <= Int.max - headerBytes, let grown = realloc(block, headerBytes + size) else { return nil }
            return grown + headerBytes
        }
        guard let moved = allocate(size, userData) else { return nil }
        // An unpooled block is larger than every class, so it holds at least the smaller of the two.
        let kept = sizeClass == unpooledClass ? size : min(size, capacity(ofClass: Int(sizeClass)))
        moved.copyMemory(from: pointer, byteCount: kept)
        release(pointer, userData)
        return moved
    }

    // MARK: - Free lists (a block's first payload word links to the next)

    @inline(__always)
    private static func count(_ lists: UnsafeMutableRawPointer, at offset: Int) {
        lists.storeBytes(of: lists.load(fromByteOffset: offset, as: Int.self) &+ 1, toByteOffset: offset, as: Int.self)
    }

    @inline(__always)
    private static func cachedBytes(_ lists: UnsafeMutableRawPointer) -> Int {
        lists.load(fromByteOffset: cachedBytesOffset, as: Int.self)
    }

    @inline(__always)
    private static func setCachedBytes(_ lists: UnsafeMutableRawPointer, _ bytes: Int) {
        lists.storeBytes(of: bytes, toByteOffset: cachedBytesOffset, as: Int.self)
    }

    @inline(__always)
    private static func pop(_ lists: UnsafeMutableRawPointer, _ sizeClass: Int) -> UnsafeMutableRawPointer? {
        let offset = sizeClass &* MemoryLayout<Int>.stride
        guard let block = lists.load(fromByteOffset: offset, as: UnsafeMutableRawPointer?.self) else { return nil }
        lists.storeBytes(of: block.load(fromByteOffset: headerBytes, as: UnsafeMutableRawPointer?.self),
                         toByteOffset: offset, as: UnsafeMutableRawPointer?.self)
        return block
    }

    @inline(__always)
    private static func push(_ lists: UnsafeMutableRawPointer, _ sizeClass: Int, _ block: UnsafeMutableRawPointer) {
        let offset = sizeClass &* MemoryLayout<Int>.stride
        block.storeBytes(of: lists.load(fromByteOffset: offset, as: UnsafeMutableRawPointer?.self),
                         toByteOffset: headerBytes, as: UnsafeMutableRawPointer?.self)
        lists.storeBytes(of: block, toByteOffset: offset, as: UnsafeMutableRawPointer?.self)
    }
}
