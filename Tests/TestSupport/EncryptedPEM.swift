/// PEM blocks marked as encrypted the legacy way (RFC 1421 headers), for loaders that must
/// refuse them instead of asking for a passphrase.
public enum EncryptedPEM {
    /// `pem` with `Proc-Type: 4,ENCRYPTED` and a `DEK-Info` line after each BEGIN line. OpenSSL
    /// asks its password callback for such a block before it decodes anything (the body, left
    /// as it was, would not decrypt under any passphrase); without a callback of the program's
    /// own, OpenSSL's default one prompts on the terminal and waits.
    public static func marked(_ pem: String) -> String {
        pem.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            guard line.hasPrefix("-----BEGIN ") else { return String(line) }
            return line + "\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n"
        }.joined(separator: "\n")
    }
}
