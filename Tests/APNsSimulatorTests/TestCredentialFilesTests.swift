#if canImport(Glibc)
import Glibc
#endif
import APNsSimulator
import Testing

/// The credentials the simulator generates (`--credentials DIR`) hold private keys: they are
/// written only into a directory of this user's that no one else can write to, never through a
/// link, and always with the key files' own permissions.
@Suite struct TestCredentialFilesTests {
    static func mode(_ path: String) -> mode_t {
        var status = stat()
        return stat(path, &status) == 0 ? status.st_mode & 0o777 : 0
    }

    @Test func aKeyFileLeftWithLoosePermissionsIsRewrittenPrivate() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let keyFile = scratch.path + "/AuthKey_ABC123DEFG.p8"
        #expect(creat(keyFile, 0o644) >= 0)
        chmod(keyFile, 0o644)
        let credentials = try TestCredentials.generate(in: scratch.path)
        #expect(credentials.authKeyFile == keyFile)
        #expect(Self.mode(keyFile) == 0o600)
        #expect(Self.mode(credentials.serverPrivateKeyFile) == 0o600)
    }

    @Test func aLinkWhereAKeyGoesIsRefusedAndItsTargetLeftAlone() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let target = scratch.path + "/elsewhere"
        #expect(creat(target, 0o644) >= 0)
        #expect(symlink(target, scratch.path + "/AuthKey_ABC123DEFG.p8") == 0)
        #expect(throws: (any Error).self) { try TestCredentials.generate(in: scratch.path) }
        var status = stat()
        #expect(stat(target, &status) == 0 && status.st_size == 0, "the key was written through the link")
        #expect(Self.mode(target) == 0o644)
    }

    @Test func aDirectoryOthersCanWriteToIsRefused() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        chmod(scratch.path, 0o777)
        #expect(throws: (any Error).self) { try TestCredentials.generate(in: scratch.path) }
        #expect(access(scratch.path + "/ca.pem", F_OK) != 0)
        // A missing directory is made private to this user.
        let fresh = scratch.path + "/fresh"
        chmod(scratch.path, 0o755)
        _ = try TestCredentials.generate(in: fresh)
        #expect(Self.mode(fresh) == 0o700)
    }
}
