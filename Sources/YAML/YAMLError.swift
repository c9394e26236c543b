/// A YAML syntax error or an unsupported construct, with where it was found.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line of the problem.
    public var line: Int
    /// 1-based column of the problem (characters).
    public var column: Int
    /// What is wrong, e.g. `mapping values are not allowed in this context`.
    public var problem: String

    /// Creates an error at a position.
    public init(line: Int, column: Int, problem: String) {
        self.line = line
        self.column = column
        self.problem = problem
    }

    /// `line N, column M: problem`.
    public var description: String { "line \(line), column \(column): \(problem)" }
}
