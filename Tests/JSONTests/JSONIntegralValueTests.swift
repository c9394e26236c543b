@testable import JSON
import Foundation
import Testing

@Suite struct JSONIntegralValueTests {
    func integral(_ number: String) throws -> Int64? {
        try JSONScanner.parse(Array(number.utf8)).root.integralValue
    }

    @Test func wholeNumbersAreReadHoweverTheyAreWritten() throws {
        let cases: [(String, Int64)] = [
            ("0", 0), ("-0", 0), ("0.0", 0), ("-0.000e-7", 0), ("0e999999999999999999999", 0),
            ("10", 10), ("10.0", 10), ("1e1", 10), ("1E+1", 10), ("1.5e1", 15), ("100e-2", 1), ("1.50e1", 15),
            ("100.5e1", 1005), ("1005", 1005), ("-42.000", -42), ("-4.2e1", -42),
            ("1700000000.0", 1_700_000_000), ("1.7e9", 1_700_000_000), ("17E8", 1_700_000_000),
            ("12345678900000000000e-10", 1_234_567_890), ("1234567890.00000000000000000000000000", 1_234_567_890),
            ("9223372036854775807", .max), ("9223372036854775807.0", .max), ("9.223372036854775807e18", .max),
            ("-9223372036854775808", .min), ("-9.223372036854775808e18", .min), ("1e18", 1_000_000_000_000_000_000),
        ]
        for (text, expected) in cases {
            #expect(try integral(text) == expected, "\(text)")
        }
    }

    @Test func fractionsAndValuesOutsideInt64AreNot() throws {
        for text in ["1.5", "0.1", "1e-1", "-2.5", "15e-1", "12345678901234567891e-10", "9223372036854775808",
                     "9.223372036854775808e18", "-9223372036854775809", "1e19", "-1e19", "1e999999999999999999999",
                     "1e-999999999999999999999", "99999999999999999999"] {
            #expect(try integral(text) == nil, "\(text)")
        }
        #expect(try JSONScanner.parse(Array("\"10\"".utf8)).root.integralValue == nil)
        #expect(try JSONScanner.parse(Array("true".utf8)).root.integralValue == nil)
    }

    /// The reading agrees with exact decimal arithmetic on generated numbers: a whole number when,
    /// and only when, the value has no fractional part and fits.
    @Test func agreesWithDecimalArithmetic() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...12, using: &generator)
            let integerDigits = length == 0 ? "0" : String(Int.random(in: 1...9, using: &generator))
                + String((1..<length).map { _ in Character(String(Int.random(in: 0...9, using: &generator))) })
            let fraction = Bool.random(using: &generator)
                ? "." + (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                    ["0", "0", "0", "5"].randomElement(using: &generator) ?? "0"
                }.joined() : ""
            let exponent = Int.random(in: -8...10, using: &generator)
            let sign = Bool.random(using: &generator) ? "-" : ""
            let text = "\(sign)\(integerDigits)\(fraction)e\(exponent)"
            let exact = try #require(Decimal(string: text), "\(text)")
            var rounded = Decimal()
            var copy = exact
            NSDecimalRound(&rounded, &copy, 0, .plain)
            // A whole Decimal prints all its digits; Int64's initializer refuses what does not fit.
            let expected = rounded == exact ? Int64(exact.description) : nil
            #expect(try integral(text) == expected, "\(text)")
        }
    }
}
