import Testing
@testable import APNsSimulator
import APNs
import HTTP2

@Suite struct APNsSimulatorRulesTests {
    let clock = TestClock()
    let signer: JWTSigner
    let trusted: JWTVerifier.TrustedKey
    let rules: APNsSimulatorRules
    let unregisteredToken = String(repeating: "cd", count: 32)
    let otherAppsToken = String(repeating: "ef", count: 32)

    init() throws {
        let pair = try APNsAuthKeyGenerator.generate()
        signer = JWTSigner(key: try APNsSigningKey(pem: pair.privateKeyPKCS8PEM), keyID: "ABC123DEFG", teamID: "TEAM123456")
        trusted = JWTVerifier.TrustedKey(publicKey: try APNsPublicKey(pem: pair.publicKeyPEM), teamID: "TEAM123456")
        let verifier = JWTVerifier(keys: ["ABC123DEFG": trusted], clock: clock.function)
        rules = APNsSimulatorRules(verifier: verifier, unregisteredTokens: [unregisteredToken.uppercased(): 1_700_000_000_123],
                                   tokenApps: [otherAppsToken.uppercased(): "com.example.other"], sendsUniqueID: true)
    }

    private func bearer() throws -> String { "bearer " + (try signer.sign(issuedAt: clock.now)) }

    /// A valid request, with `changes` applied to its headers (nil value removes the header).
    private func request(
        method: String = "POST", token: String? = nil, path: String? = nil,
        headers changes: [String: String?] = [:], body: [UInt8] = Array(#"{"aps":{}}"#.utf8)
    ) throws -> APNsSimulatorRequest {
        var headers: [(name: String, value: String)] = [
            (name: "authorization", value: try bearer()), (name: "apns-push-type", value: "alert"),
            (name: "apns-topic", value: sampleTopic), (name: "apns-priority", value: "10"),
        ]
        for (name, value) in changes {
            headers.removeAll { $0.name == name }
            if let value { headers.append((name: name, value: value)) }
        }
        return APNsSimulatorRequest(method: method, path: path ?? "/3/device/" + (token ?? sampleToken), headers: headers, body: body)
    }

    private func answer(_ request: APNsSimulatorRequest) -> APNsSimulatorAnswer {
        var connection = APNsConnectionAuthState()
        return rules.answer(request, connection: &connection)
    }

    private func expectRejection(_ request: APNsSimulatorRequest, _ status: Int, _ reason: APNsReason,
                                 sourceLocation: SourceLocation = #_sourceLocation) {
        let result = answer(request)
        #expect(result.status == status, sourceLocation: sourceLocation)
        #expect(result.reason == reason, sourceLocation: sourceLocation)
        #expect(APNsResponse(status: result.status, headers: result.headers.map(HTTP2HeaderField.init), body: result.body).reason == reason,
                sourceLocation: sourceLocation)
        #expect(result.header("apns-id") != nil, sourceLocation: sourceLocation)
    }

    @Test func acceptsAValidRequestWithGeneratedAndEchoedIDs() throws {
        let accepted = answer(try request())
        #expect(accepted.status == 200 && accepted.body.isEmpty && accepted.reason == nil)
        let generated = try #require(accepted.header("apns-id"))
        #expect(APNsSimulatorRules.isValidUUID(generated) && generated == generated.lowercased())
        #expect(Array(generated.utf8)[14] == UInt8(ascii: "4"))
        #expect(accepted.header("apns-unique-id") != nil)
        #expect(answer(try request()).header("apns-id") != generated)

        let id = "0E9C4A5E-7F1B-4C3D-9A2E-1B2C3D4E5F60"
        #expect(answer(try request(headers: ["apns-id": id])).header("apns-id") == id)
        // Optional headers and the other priorities, push types with their suffixes, voip's larger limit.
        #expect(answer(try request(headers: ["apns-push-type": nil, "apns-priority": nil])).status == 200)
        #expect(answer(try request(headers: ["apns-priority": "1", "apns-expiration": "0", "apns-collapse-id": "c"])).status == 200)
        let voip = try request(headers: ["apns-push-type": "voip", "apns-topic": sampleTopic + ".voip"],
                               body: [UInt8](repeating: 0x20, count: 5120))
        #expect(answer(voip).status == 200)
        #expect(answer(try request(token: String(repeating: "A1", count: 100))).status == 200)
    }

    @Test func answersMethodAndPathErrors() throws {
        expectRejection(try request(method: "GET"), 405, .methodNotAllowed)
        expectRejection(try request(path: "/2/device/" + sampleToken), 404, .badPath)
        expectRejection(try request(path: "/"), 404, .badPath)
        expectRejection(try request(path: "/3/device/"), 400, .missingDeviceToken)
    }

    @Test func answersBadDeviceTokens() throws {
        for token in [String(repeating: "a", count: 63), String(repeating: "ab", count: 31), String(repeating: "a", count: 65),
                      String(repeating: "ab", count: 101), String(repeating: "zz", count: 32), sampleToken + "/x"] {
            expectRejection(try request(token: token), 400, .badDeviceToken)
        }
    }

    @Test func answersHeaderErrors() throws {
        expectRejection(try request(headers: ["apns-topic": nil]), 400, .missingTopic)
        expectRejection(try request(headers: ["apns-topic": ""]), 400, .badTopic)
        expectRejection(try request(headers: ["apns-push-type": "voip"]), 400, .badTopic)   // topic lacks .voip
        expectRejection(try request(headers: ["apns-push-type": "Alert"]), 400, .invalidPushType)
        for priority in ["0", "11", "high", ""] {
            expectRejection(try request(headers: ["apns-priority": priority]), 400, .badPriority)
        }
        // Background pushes take priority 5 (or 1); 10, also as APNs' default for no header, is an error.
        expectRejection(try request(headers: ["apns-push-type": "background", "apns-priority": "10"]), 400, .badPriority)
        expectRejection(try request(headers: ["apns-push-type": "background", "apns-priority": nil]), 400, .badPriority)
        #expect(answer(try request(headers: ["apns-push-type": "background", "apns-priority": "5"])).status == 200)
        for expiration in ["soon", "-1", "1.5", "", "99999999999999999999"] {
            expectRejection(try request(headers: ["apns-expiration": expiration]), 400, .badExpirationDate)
        }
        #expect(answer(try request(headers: ["apns-collapse-id": String(repeating: "c", count: 64)])).status == 200)
        expectRejection(try request(headers: ["apns-collapse-id": String(repeating: "c", count: 65)]), 400, .badCollapseId)
        for id in ["not-a-uuid", "0e9c4a5e7f1b4c3d9a2e1b2c3d4e5f60", "0e9c4a5e-7f1b-4c3d-9a2e-1b2c3d4e5f6g"] {
            expectRejection(try request(headers: ["apns-id": id]), 400, .badMessageId)
        }
        var duplicated = try request()
        duplicated.headers.append((name: "apns-topic", value: sampleTopic))
        expectRejection(duplicated, 400, .duplicateHeaders)
    }

    @Test func answersPayloadErrors() throws {
        expectRejection(try request(body: []), 400, .payloadEmpty)
        #expect(answer(try request(body: [UInt8](repeating: 0x20, count: 4096))).status == 200)
        expectRejection(try request(body: [UInt8](repeating: 0x20, count: 4097)), 413, .payloadTooLarge)
        let voip = try request(headers: ["apns-push-type": "voip", "apns-topic": sampleTopic + ".voip"],
                               body: [UInt8](repeating: 0x20, count: 5121))
        expectRejection(voip, 413, .payloadTooLarge)
        // A body the server kept only the start of is judged by its length as received.
        var cut = try request(body: [UInt8](repeating: 0x20, count: 100))
        cut.bodyLength = 2 << 20
        expectRejection(cut, 413, .payloadTooLarge)
    }

    @Test func answersProviderTokenErrors() throws {
        expectRejection(try request(headers: ["authorization": nil]), 403, .missingProviderToken)
        expectRejection(try request(headers: ["authorization": "bearer x.y.z"]), 403, .invalidProviderToken)
        let foreign = JWTSigner(key: signer.key, keyID: "UNKNOWNKEY", teamID: "TEAM123456")
        expectRejection(try request(headers: ["authorization": "bearer " + (try foreign.sign(issuedAt: clock.now))]),
                        403, .invalidProviderToken)
        // A verified (cached) token still expires by the clock.
        let valid = try request()
        #expect(answer(valid).status == 200)
        clock.advance(by: 3601)
        expectRejection(valid, 403, .expiredProviderToken)
        #expect(answer(try request()).status == 200)   // a freshly signed token works again
    }

    @Test func extremeIssueTimesAreRefusedWithoutOverflowing() throws {
        let ancient = try request(headers: ["authorization": "bearer " + (try signer.sign(issuedAt: .min))])
        let distant = try request(headers: ["authorization": "bearer " + (try signer.sign(issuedAt: .max))])
        expectRejection(ancient, 403, .expiredProviderToken)
        expectRejection(distant, 403, .invalidProviderToken)
        // A verifier that takes tokens of any age leaves the age to the token limits.
        let lenient = APNsSimulatorRules(verifier: JWTVerifier(keys: ["ABC123DEFG": trusted], maximumAgeSeconds: .max,
                                                               clock: clock.function))
        var connection = APNsConnectionAuthState()
        let limited = lenient.answer(ancient, connection: &connection,
                                     tokenLimits: APNsSimulatorRules.TokenLimits(maximumAgeSeconds: 3600))
        #expect(limited.status == 403 && limited.reason == .expiredProviderToken)
    }

    @Test func onlyRequestsThatPassAuthenticationMarkTheConnectionAuthenticated() throws {
        var duplicated = try request()
        duplicated.headers.append((name: "apns-topic", value: sampleTopic))
        for early in [try request(method: "GET"), try request(path: "/2/device/" + sampleToken), duplicated,
                      try request(headers: ["authorization": nil])] {
            var connection = APNsConnectionAuthState()
            #expect(rules.answer(early, connection: &connection).status != 200)
            #expect(!connection.hasAuthenticatedRequest)
        }
        var connection = APNsConnectionAuthState()
        #expect(rules.answer(try request(token: "abc"), connection: &connection).reason == .badDeviceToken)
        #expect(connection.hasAuthenticatedRequest, "the request itself is judged after authentication")
    }

    @Test func bindsAConnectionToOneTeam() throws {
        var connection = APNsConnectionAuthState()
        #expect(rules.answer(try request(), connection: &connection).status == 200)
        #expect(connection.boundTeamID == "TEAM123456")
        connection.boundTeamID = "OTHERTEAM0"
        #expect(rules.answer(try request(), connection: &connection).reason == .invalidProviderToken)
    }

    @Test func answersUnregisteredWithAMillisecondTimestamp() throws {
        let result = answer(try request(token: unregisteredToken))
        #expect(result.status == 410)
        #expect(String(decoding: result.body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1700000000123}"#)
        let parsed = APNsResponse(status: result.status, headers: result.headers.map(HTTP2HeaderField.init), body: result.body)
        #expect(parsed.timestamp == 1_700_000_000_123)
        #expect(APNsResponseClassifier.classify(parsed) == .rejected(invalidToken: true))
    }

    /// A token issued to another app: 400 DeviceTokenNotForTopic for any other app's topic;
    /// its own app's topics, push type suffixes included, are answered as usual.
    @Test func answersDeviceTokenNotForTopicForAnotherAppsToken() throws {
        expectRejection(try request(token: otherAppsToken), 400, .deviceTokenNotForTopic)
        expectRejection(try request(token: otherAppsToken, headers: ["apns-topic": "com.example.otherwise"]), 400, .deviceTokenNotForTopic)
        #expect(answer(try request(token: otherAppsToken, headers: ["apns-topic": "com.example.other"])).status == 200)
        let voip = try request(token: otherAppsToken, headers: [
            "apns-topic": "com.example.other.voip", "apns-push-type": "voip",
        ])
        #expect(answer(voip).status == 200)
        let classified = APNsResponseClassifier.classify(status: 400, reason: .deviceTokenNotForTopic)
        #expect(classified == .rejected(invalidToken: true))
    }

    @Test func certificateConnectionsUseTheHook() throws {
        var connection = APNsConnectionAuthState(clientCertificateSubject: "CN=Apple Push Services: com.example.chat")
        let unauthenticated = try request(headers: ["authorization": nil, "apns-topic": nil])
        #expect(rules.answer(unauthenticated, connection: &connection).reason == .missingProviderToken)

        let verifier = JWTVerifier(keys: [:], clock: clock.function)
        let certificateRules = APNsSimulatorRules(verifier: verifier, certificateAuthPolicy: { subject, topic in
            subject.hasSuffix(sampleTopic) && (topic == nil || topic == sampleTopic) ? nil : .badCertificate
        })
        #expect(certificateRules.answer(unauthenticated, connection: &connection).status == 200)
        let otherTopic = try request(headers: ["authorization": nil, "apns-topic": "com.other"])
        #expect(certificateRules.answer(otherTopic, connection: &connection).reason == .badCertificate)
    }
}
