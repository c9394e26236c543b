import Testing
@testable import APNs

@Suite struct APNsTokenProviderTests {
    private func makeProvider(refresh: Int64 = APNsTokenProvider.defaultRefreshSeconds) throws -> (APNsTokenProvider, TestClock) {
        let pair = try APNsAuthKeyGenerator.generate()
        let signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
        let clock = TestClock()
        return (APNsTokenProvider(signer: signer, refreshIntervalSeconds: refresh, clock: clock.function), clock)
    }

    @Test func reusesTheTokenUntilFiftyMinutesThenRefreshes() throws {
        let (provider, clock) = try makeProvider()
        let start = clock.now
        #expect(provider.issuedAt == nil)
        let first = try provider.currentToken()
        #expect(provider.issuedAt == start)
        clock.advance(by: 50 * 60 - 1)
        #expect(try provider.currentToken() == first)
        clock.advance(by: 1)
        let second = try provider.currentToken()
        #expect(second != first)
        #expect(provider.issuedAt == start + 50 * 60)
        #expect(try provider.authorizationHeaderValue() == "bearer " + second)
    }

    @Test func refreshIntervalNeverGoesBelowTwentyMinutes() throws {
        let (provider, clock) = try makeProvider(refresh: 60)
        #expect(provider.refreshIntervalSeconds == 20 * 60)
        let first = try provider.currentToken()
        clock.advance(by: 19 * 60)
        #expect(try provider.currentToken() == first)
        clock.advance(by: 60)
        #expect(try provider.currentToken() != first)
    }

    @Test func expiredProviderTokenForcesOneFreshTokenThenTheTwentyMinuteFloorHolds() throws {
        let (provider, clock) = try makeProvider()
        let first = try provider.authorization()
        clock.advance(by: 60)
        // Right after ExpiredProviderToken: re-signed at once, although only a minute old.
        #expect(provider.reportExpired(generation: first.generation) == true)
        let second = try provider.authorization()
        #expect(second.headerValue != first.headerValue)
        #expect(second.generation == first.generation + 1)
        // Late answers for the old token do not sign a third one.
        #expect(provider.reportExpired(generation: first.generation) == true)
        #expect(try provider.authorization().headerValue == second.headerValue)
        // The forced token called expired too: kept until it is 20 minutes old (clock skew).
        clock.advance(by: 60)
        #expect(provider.reportExpired(generation: second.generation) == false)
        #expect(try provider.authorization().headerValue == second.headerValue)
        clock.advance(by: 19 * 60)
        #expect(provider.invalidate(second.headerValue) == true)
        let third = try provider.authorization()
        #expect(third.headerValue != second.headerValue)
    }

    @Test func invalidProviderTokenIsLoggedOncePerProvider() throws {
        let (provider, _) = try makeProvider()
        #expect(provider.shouldLogInvalidProviderToken())
        #expect(!provider.shouldLogInvalidProviderToken())
        #expect(provider.keyID == "ABC123DEFG")
    }

    @Test func concurrentCallersShareOneToken() async throws {
        let (provider, _) = try makeProvider()
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<16 { group.addTask { try provider.currentToken() } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
    }
}
