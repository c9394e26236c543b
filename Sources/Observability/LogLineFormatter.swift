/// Renders one log event as a JSON line or a text line.
///
/// Both forms put exactly one event on one line whatever the message and metadata contain:
/// JSON escapes as JSON does; text escapes control characters (`\n`, `\r`, `\t`, `\u{1b}` …),
/// DEL, C1 controls, Unicode line and paragraph separators and bidirectional overrides, and
/// backslashes (so an escape in the input cannot pass for one the formatter made), and quotes
/// metadata values that hold spaces, `=` or quotes. Input that reaches a log line (a request
/// id, an APNs reason, a Kafka error) therefore cannot forge another line or another field.
public enum LogLineFormatter {
    /// The line for one event, newline included.
    public static func format(format: LoggingSystem.Format, timeMilliseconds: Int64, level: Logger.Level, label: String,
                              message: String, metadata: [(String, String)]) -> String {
        let time = Timestamp.iso8601(timeMilliseconds)
        var line = ""
        switch format {
        case .json:
            line = "{\"time\":\"\(time)\",\"level\":\"\(level.name)\",\"logger\":"
            JSONText.appendQuoted(label, to: &line)
            line += ",\"message\":"
            JSONText.appendQuoted(message, to: &line)
            for (key, value) in metadata {
                line += ","
                JSONText.appendQuoted(key, to: &line)
                line += ":"
                JSONText.appendQuoted(value, to: &line)
            }
            line += "}\n"
        case .text:
            line = "\(time) \(level.name.uppercased()) ["
            appendEscaped(label, to: &line)
            line += "] "
            appendEscaped(message, to: &line)
            for (key, value) in metadata {
                line += " "
                appendEscaped(key, to: &line, escapingFieldSeparators: true)
                line += "="
                appendValue(value, to: &line)
            }
            line += "\n"
        }
        return line
    }

    /// A metadata value: bare when it is plain, else in double quotes.
    static func appendValue(_ value: String, to line: inout String) {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { scalar in
            scalar == " " || scalar == "=" || scalar == "\"" || needsEscape(scalar)
        }
        if needsQuotes {
            line += "\""
            appendEscaped(value, to: &line, escapingQuotes: true)
            line += "\""
        } else {
            appendEscaped(value, to: &line)
        }
    }

    /// Appends `text` with every character that could break or fake a line escaped.
    static func appendEscaped(_ text: String, to line: inout String, escapingQuotes: Bool = false,
                              escapingFieldSeparators: Bool = false) {
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case "\\": line += "\\\\"
            case "\"" where escapingQuotes: line += "\\\""
            case " " where escapingFieldSeparators, "=" where escapingFieldSeparators:
                line += "_"
            default:
                if needsEscape(scalar) {
                    line += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    line.unicodeScalars.append(scalar)
                }
            }
        }
    }

    /// `text` with line breaks, tabs, backslashes and every character ``needsEscape(_:)`` names
    /// escaped as in log lines, so that text from a configuration or the command line printed in
    /// an error cannot forge lines or recolour a terminal.
    public static func escapingControlCharacters(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0) || $0 == "\\" }) else { return text }
        var escaped = ""
        appendEscaped(text, to: &escaped)
        return escaped
    }

    /// C0 and C1 controls, DEL, line/paragraph separators, bidirectional embeddings and isolates.
    public static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
