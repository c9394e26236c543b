import Foundation
import TestSupport
@testable import HTTP2
import Testing

/// The memory a passphrase is handed to OpenSSL in: its own, NUL-terminated, wiped after use.
@Suite struct TLSCredentialsTests {
    @Test func passphraseBytesAreUTF8FollowedByNUL() {
        let seen = TLSCredentials.withPassphraseBytes("pässwörd") { bytes -> [UInt8]? in
            guard let bytes, let base = bytes.baseAddress else { return nil }
            #expect(base[bytes.count] == 0)
            return Array(bytes)
        }
        #expect(seen == Array("pässwörd".utf8))
        #expect(TLSCredentials.withPassphraseBytes(nil) { $0 == nil })
        #expect(TLSCredentials.withPassphraseBytes("") { bytes in bytes?.count == 0 && bytes?.baseAddress?[0] == 0 })
    }

    @Test func wipeZeroesEveryByte() {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: 37, alignment: 1)
        defer { memory.deallocate() }
        memory.copyBytes(from: Array(repeating: UInt8(0xA5), count: 37))
        TLSCredentials.wipe(memory)
        #expect(memory.allSatisfy { $0 == 0 })
    }
}

/// What `ReadableFile` says of each kind of path a configuration may name by mistake.
@Suite struct ReadableFileTests {
    @Test func onlyRegularFilesWithinTheLimitPass() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let file = scratch.file("key.pem")
        #expect(FileManager.default.createFile(atPath: file, contents: Data(repeating: 0x41, count: 100)))
        #expect(ReadableFile.problem(at: file) == nil)
        #expect(ReadableFile.problem(at: file, maximumBytes: 99) == "is larger than 99 bytes")
        #expect(ReadableFile.problem(at: scratch.path) == "is a directory")
        let fifo = scratch.file("pipe")
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(ReadableFile.problem(at: fifo) == "is not a regular file")
        #expect(ReadableFile.problem(at: "/dev/zero") == "is not a regular file")
        #expect(ReadableFile.problem(at: scratch.file("missing")) == "No such file or directory")
        let loop = scratch.file("loop")
        #expect(symlink(loop, loop) == 0)
        #expect(ReadableFile.problem(at: loop) == "Too many levels of symbolic links")
        let link = scratch.file("link")
        #expect(symlink(file, link) == 0)
        #expect(ReadableFile.problem(at: link) == nil)   // links are followed
    }
}
