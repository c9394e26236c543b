@testable import HTTP2
import Testing

/// A client configuration's passphrase never shows in its descriptions or reflection.
@Suite struct TLSClientConfigurationDescriptionTests {
    @Test func descriptionsAndReflectionNeverShowThePassphrase() {
        let passphrase = "correct horse battery staple"
        let configuration = TLSClientConfiguration(caFile: "/etc/apns/ca.pem", certificateFile: "/etc/apns/legacy.pem",
                                                   privateKeyFile: "/etc/apns/legacy-key.pem", privateKeyPassphrase: passphrase)
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in [String(describing: configuration), String(reflecting: configuration), dumped, "\([configuration])"] {
            #expect(!text.contains("horse"), "\(text)")
            #expect(text.contains("<redacted>"), "\(text)")
            #expect(text.contains("/etc/apns/legacy-key.pem"), "\(text)")
        }
        #expect(String(describing: TLSClientConfiguration(pkcs12File: "/etc/apns/legacy.p12")).contains("privateKeyPassphrase: none"))
    }
}
