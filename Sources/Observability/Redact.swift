/// Shortening of secrets-adjacent values before they reach a log line.
public enum Redact {
    /// A device token shortened to its first 8 digits, as the contract requires in logs.
    public static func token(_ token: String) -> String {
        token.count <= 8 ? token : String(token.prefix(8)) + "…"
    }
}
