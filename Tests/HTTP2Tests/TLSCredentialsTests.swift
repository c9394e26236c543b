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
