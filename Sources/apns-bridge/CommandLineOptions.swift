/// A parsed command line of one subcommand: `--name value`, `--name=value`, repeatable options
/// and bare flags, checked against what the subcommand accepts.
struct CommandLineOptions {
    /// What a subcommand accepts.
    struct Specification {
        /// Options that take a value.
        var valued: Set<String>
        /// Options without a value.
        var flags: Set<String> = ["help"]
    }

    /// A command line error; the process exits 2 with the message.
    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    private var values: [String: [String]] = [:]
    private var presentFlags: Set<String> = []

    /// Parses `arguments` (without the program and subcommand names).
    init(_ arguments: [String], accepting specification: Specification) throws {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw UsageError(description: "unexpected argument '\(argument)'")
            }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if specification.flags.contains(name) {
                guard inlineValue == nil else { throw UsageError(description: "--\(name) takes no value") }
                presentFlags.insert(name)
            } else if specification.valued.contains(name) {
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    index += 1
                    guard index < arguments.count else { throw UsageError(description: "--\(name) needs a value") }
                    value = arguments[index]
                }
                values[name, default: []].append(value)
            } else {
                throw UsageError(description: "unknown option --\(name)")
            }
            index += 1
        }
    }

    /// The names of every option and flag given.
    var givenNames: Set<String> {
        presentFlags.union(values.keys)
    }

    /// The last value given for `name`, if any.
    func value(_ name: String) -> String? {
        values[name]?.last
    }

    /// Every value given for a repeatable option.
    func values(_ name: String) -> [String] {
        values[name] ?? []
    }

    /// Whether a bare flag was given.
    func flag(_ name: String) -> Bool {
        presentFlags.contains(name)
    }

    /// The value of `name` as an integer within `range`, or `defaultValue` when absent.
    func integer(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws -> Int {
        guard let text = value(name) else { return defaultValue }
        guard let number = Int(text), range.contains(number) else {
            throw UsageError(description: "--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
        }
        return number
    }

    /// The value of a required option.
    func required(_ name: String) throws -> String {
        guard let value = value(name) else { throw UsageError(description: "--\(name) is required") }
        return value
    }
}
