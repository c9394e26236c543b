import Testing
@testable import APNs

@Suite struct APNsTokenProviderTests {
    private func makeProvider(refresh: Int64 = APNsTokenProvider.defaultRefreshSeconds) throws -> (APNsTokenProvider, TestClock) {
        let pair = try APNsAuthKeyGenerator.generate()
        let signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
        let clock = TestClock()
        return (APNsTokenProvider(signer: signer, refreshIntervalSeconds: refresh, clock: clock.function), clock)
    }

    @Test func aConnectionKeepsItsTokenUntilFiftyMinutesThenTakesANewOne() throws {
        let (provider, clock) = try makeProvider()
        let start = clock.now
        #expect(provider.issuedAt == nil)
        let first = try provider.authorization()
        #expect(provider.issuedAt == start)
        #expect(first.issuedAt == start)
        clock.advance(by: 50 * 60 - 1)
        #expect(try provider.authorization(keeping: first).headerValue == first.headerValue)
        clock.advance(by: 1)
        let second = try provider.authorization(keeping: first)
        #expect(second.headerValue != first.headerValue)
        #expect(second.generation == first.generation + 1)
        #expect(provider.issuedAt == start + 50 * 60)
        #expect(try provider.authorizationHeaderValue() == second.headerValue)
    }

    /// A connection that opens late takes the newest token only while it can keep it for 21
    /// minutes before that token is 50 minutes old; otherwise it gets a new one, which the
    /// connections opened after it share, and the older connections take when theirs is old.
    @Test func aConnectionOpenedLateGetsATokenItCanKeepForTwentyOneMinutes() throws {
        let (provider, clock) = try makeProvider()
        let first = try provider.authorization()
        clock.advance(by: 29 * 60)
        #expect(try provider.authorization().headerValue == first.headerValue, "29 minutes old: 21 left")
        clock.advance(by: 1)
        let late = try provider.authorization()
        #expect(late.generation == first.generation + 1)
        #expect(try provider.authorization().headerValue == late.headerValue, "shared by the next connection")
        // At 50 minutes the first connections take the newest, itself 21 minutes old.
        clock.advance(by: 21 * 60 - 1)
        #expect(try provider.authorization(keeping: first).headerValue == late.headerValue)
        #expect(try provider.authorization(keeping: late).headerValue == late.headerValue)
    }

    /// Connections opening at any minute over five hours, each asking for its token every minute
    /// as a pool does: none changes tokens within 20 minutes of taking one, and none sends a
    /// token 50 minutes old or older.
    @Test func noConnectionChangesTokensWithinTwentyMinutes() throws {
        let (provider, clock) = try makeProvider()
        let start = clock.now
        var held: [APNsTokenProvider.Authorization?] = Array(repeating: nil, count: 40)
        var takenAt = Array(repeating: Int64(0), count: 40)
        let opensAt = (0..<40).map { Int64($0 * 37 % (5 * 60)) }  // spread over every part of a token's life
        var signed = Set<UInt64>()
        for minute in Int64(0)..<(6 * 60) {
            for connection in 0..<40 where opensAt[connection] <= minute {
                let token = try provider.authorization(keeping: held[connection])
                signed.insert(token.generation)
                if let previous = held[connection], previous.generation != token.generation {
                    #expect(clock.now - takenAt[connection] >= 21 * 60, "connection \(connection) at minute \(minute)")
                }
                if held[connection]?.generation != token.generation { takenAt[connection] = clock.now }
                #expect(clock.now - token.issuedAt < 50 * 60)
                held[connection] = token
            }
            clock.advance(by: 60)
        }
        // Tokens are still shared: about one per half hour, not one per connection.
        #expect(signed.count <= (6 * 60) / 30 + 1, "\(signed.count) tokens")
        #expect(clock.now - start == 6 * 3600)
    }

    /// Each connection keeps a token 21 minutes and a token is shared for 20 before the next:
    /// the refresh age never goes below 41 minutes, and tokens stay 20 minutes apart.
    @Test func refreshIntervalNeverGoesBelowFortyOneMinutes() throws {
        let (provider, clock) = try makeProvider(refresh: 60)
        #expect(provider.refreshIntervalSeconds == 41 * 60)
        let first = try provider.authorization()
        clock.advance(by: 20 * 60)
        #expect(try provider.authorization().headerValue == first.headerValue, "still shared")
        clock.advance(by: 1)
        let second = try provider.authorization()
        #expect(second.headerValue != first.headerValue)
        #expect(try provider.authorization(keeping: first).headerValue == first.headerValue)
        clock.advance(by: 21 * 60 - 1)
        // 41 minutes: the first connection changes; the newest is too old to keep 21 minutes.
        let third = try provider.authorization(keeping: first)
        #expect(third.generation == second.generation + 1)
        #expect(third.issuedAt - second.issuedAt >= 20 * 60 && second.issuedAt - first.issuedAt >= 20 * 60)
    }

    @Test func expiredProviderTokenForcesOneFreshTokenThenTheTwentyMinuteFloorHolds() throws {
        let (provider, clock) = try makeProvider()
        let first = try provider.authorization()
        clock.advance(by: 60)
        // Right after ExpiredProviderToken: re-signed at once, although only a minute old, and
        // a connection holding the expired token takes the new one.
        #expect(provider.reportExpired(generation: first.generation) == true)
        let second = try provider.authorization(keeping: first)
        #expect(second.headerValue != first.headerValue)
        #expect(second.generation == first.generation + 1)
        // Late answers for the old token do not sign a third one.
        #expect(provider.reportExpired(generation: first.generation) == true)
        #expect(try provider.authorization(keeping: first).headerValue == second.headerValue)
        // The forced token called expired too: kept until it is 20 minutes old (clock skew).
        clock.advance(by: 60)
        #expect(provider.reportExpired(generation: second.generation) == false)
        #expect(try provider.authorization(keeping: second).headerValue == second.headerValue)
        clock.advance(by: 19 * 60)
        #expect(provider.invalidate(second.headerValue) == true)
        let third = try provider.authorization(keeping: second)
        #expect(third.headerValue != second.headerValue)
    }

    /// APNs calling an older token expired retires it (and older ones) for the connections
    /// still sending it, without signing a new one when the newest is fine.
    @Test func anOlderTokenCalledExpiredIsDroppedByItsConnections() throws {
        let (provider, clock) = try makeProvider()
        let first = try provider.authorization()
        clock.advance(by: 31 * 60)
        let second = try provider.authorization()
        #expect(second.generation == first.generation + 1)
        #expect(provider.reportExpired(generation: first.generation) == true)
        #expect(try provider.authorization(keeping: first).headerValue == second.headerValue)
        #expect(try provider.authorization(keeping: second).headerValue == second.headerValue)
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

    /// The bearer token is a credential for an hour: `String(describing:)`, `String(reflecting:)`
    /// and `dump` of an authorization, and of the provider holding it, never print it.
    @Test func descriptionsAndReflectionNeverShowTheToken() throws {
        let (provider, _) = try makeProvider()
        let authorization = try provider.authorization()
        let jwt = String(authorization.headerValue.dropFirst("bearer ".count))
        #expect(authorization.headerValue.hasPrefix("bearer ") && jwt.split(separator: ".").count == 3)
        let header = String(jwt.split(separator: ".")[0])
        var dumped = ""
        dump(authorization, to: &dumped)
        var providerDumped = ""
        dump(provider, to: &providerDumped)
        for text in [String(describing: authorization), String(reflecting: authorization), dumped,
                     String(describing: provider), String(reflecting: provider), providerDumped, "\([authorization])"] {
            #expect(!text.contains(header), "\(text)")
        }
        #expect(String(describing: authorization).contains("<redacted>"))
        #expect(dumped.contains("generation: \(authorization.generation)"), "\(dumped)")
        #expect(providerDumped.contains("ABC123DEFG"), "\(providerDumped)")
    }
}
