import Testing
import YAML

@Suite struct YAMLParserTests {
    /// A configuration file of a few megabytes is refused (or read) in moments: long lists and
    /// mappings are built in linear time. Appending by copying, as before, took minutes for
    /// these sizes (the whole list copied for every item), far past the time limit.
    @Test(.timeLimit(.minutes(1)))
    func longListsAndMappingsParseInLinearTime() throws {
        let items = 150_000
        let list = try #require(try YAMLParser.parse("junk:\n" + String(repeating: "  - item\n", count: items)))
        guard case .sequence(let parsedItems, _)? = list["junk"] else {
            Issue.record("not a sequence")
            return
        }
        #expect(parsedItems.count == items)
        let keys = 100_000
        let mapping = try #require(try YAMLParser.parse((0..<keys).map { "key\($0): \($0)\n" }.joined()))
        guard case .mapping(let entries, _) = mapping else {
            Issue.record("not a mapping")
            return
        }
        #expect(entries.count == keys)
        #expect(mapping["key99999"]?.scalarValue == "99999")
    }

    @Test func parsesNestedBlockAndFlowCollectionsWithPositions() throws {
        let text = """
        kafka:
          brokers: localhost:9092
          topics: [a, "b"]
        apps:
          - name: chat
            n: 3
        """
        let root = try #require(try YAMLParser.parse(text))
        guard case .mapping(let entries, let position) = root else {
            Issue.record("expected a mapping")
            return
        }
        #expect(position == YAMLPosition(line: 1, column: 1))
        #expect(entries.map { $0.key.scalarValue } == ["kafka", "apps"])
        let brokers = try #require(root["kafka"]?["brokers"])
        #expect(brokers == .scalar(value: "localhost:9092", style: .plain, position: YAMLPosition(line: 2, column: 12)))
        guard case .sequence(let topics, _)? = root["kafka"]?["topics"] else {
            Issue.record("expected a sequence")
            return
        }
        #expect(topics.map(\.scalarValue) == ["a", "b"])
        if case .scalar(_, let style, _) = topics[1] { #expect(style == .quoted) }
        guard case .sequence(let apps, _)? = root["apps"] else {
            Issue.record("expected a sequence")
            return
        }
        #expect(apps[0]["name"]?.scalarValue == "chat")
        #expect(apps[0]["n"]?.line == 6)
    }

    @Test func emptyInputHasNoDocument() throws {
        #expect(try YAMLParser.parse("") == nil)
        #expect(try YAMLParser.parse("# only a comment\n") == nil)
    }

    @Test func nullScalars() throws {
        let root = try #require(try YAMLParser.parse("a:\nb: ~\nc: null\nd: 'null'\n"))
        #expect(root["a"]?.isNull == true)
        #expect(root["b"]?.isNull == true)
        #expect(root["c"]?.isNull == true)
        #expect(root["d"]?.isNull == false)
    }

    @Test func syntaxErrorsCarryLineAndColumn() {
        #expect {
            _ = try YAMLParser.parse("a: 1\nb: [1, 2\nc: 3\n")
        } throws: { error in
            guard let error = error as? YAMLError else { return false }
            return error.line >= 2 && error.column >= 1 && !error.problem.isEmpty
                && error.description.hasPrefix("line \(error.line), column \(error.column): ")
        }
        #expect(throws: YAMLError.self) { _ = try YAMLParser.parse("a: b: c") }
        #expect(throws: YAMLError.self) { _ = try YAMLParser.parse("\"unterminated") }
    }

    /// A control character (here NUL, then ESC) is reported where it is, not at the file's start.
    @Test func controlCharactersAreReportedWhereTheyAre() {
        for (text, line, column) in [("a: 1\nb: 2\nc: x\u{0}y\n", 3, 5), ("a: 1\n  # \u{1B}\n", 2, 5)] {
            do {
                _ = try YAMLParser.parse(text)
                Issue.record("expected an error for \(text.debugDescription)")
            } catch {
                #expect(error.line == line && error.column == column, "\(error)")
                #expect(error.problem.contains("control characters"), "\(error)")
            }
        }
    }

    @Test func duplicateKeysAreRejectedWithPosition() {
        do {
            _ = try YAMLParser.parse("a: 1\nb: 2\na: 3\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.line == 3)
            #expect(error.column == 1)
            #expect(error.problem == "duplicate mapping key (the same key as at line 1, column 1)")
        }
        // A key is not echoed: a secret written as a key (a value with its colon misplaced) stays out.
        do {
            _ = try YAMLParser.parse("auth: {type: token, hunter2, hunter2}\n")
            Issue.record("expected an error")
        } catch {
            #expect(!error.description.contains("hunter2"), "\(error)")
            #expect(error.problem.contains("line 1, column 21"), "\(error)")
        }
    }

    @Test func anchorsAliasesAndComplexKeysAreRejected() {
        #expect(throws: YAMLError.self) { _ = try YAMLParser.parse("a: &x 1\nb: *x\n") }
        #expect(throws: YAMLError.self) { _ = try YAMLParser.parse("a: &x [1]\n") }
        #expect(throws: YAMLError.self) { _ = try YAMLParser.parse("? [a, b]\n: 1\n") }
        #expect(throws: YAMLError.self) { _ = try YAMLParser.parse("a: 1\n---\nb: 2\n") }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: YAMLError.self) { _ = try YAMLParser.parse(deep) }
        let ok = String(repeating: "[", count: 50) + String(repeating: "]", count: 50)
        #expect(throws: Never.self) { _ = try YAMLParser.parse(ok) }
    }

    @Test func unicodeAndBlockScalars() throws {
        let root = try #require(try YAMLParser.parse("name: \"caf\\u00e9 ☕\"\ntext: |\n  line1\n  line2\n"))
        #expect(root["name"]?.scalarValue == "café ☕")
        #expect(root["text"]?.scalarValue == "line1\nline2\n")
    }
}
