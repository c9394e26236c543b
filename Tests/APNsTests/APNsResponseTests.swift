import Testing
@testable import APNs
import HTTP2

@Suite struct APNsResponseTests {
    @Test func reasonsRoundTripTheirSpellingAndStatus() {
        #expect(APNsReason.allKnown.count == 33)
        for reason in APNsReason.allKnown {
            #expect(APNsReason(reason.rawValue) == reason)
            #expect(reason.status != nil)
        }
        #expect(APNsReason("Unregistered") == .unregistered)
        #expect(APNsReason.unregistered.status == 410)
        #expect(APNsReason("SomethingNew") == .unknown("SomethingNew"))
        #expect(APNsReason("SomethingNew").status == nil)
    }

    @Test func parsesHeadersAndErrorBodies() {
        let unregistered = APNsResponse(
            status: 410, headers: [HTTP2HeaderField(name: "apns-id", value: "id-1"), HTTP2HeaderField(name: "apns-unique-id", value: "u-1")],
            body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        #expect(unregistered == APNsResponse(status: 410, apnsID: "id-1", apnsUniqueID: "u-1",
                                             reason: .unregistered, timestamp: 1_700_000_000_123))
        let bad = APNsResponse(status: 400, headers: [], body: Array(#" { "reason" : "BadTopic" } "#.utf8))
        #expect(bad.reason == .badTopic && bad.timestamp == nil)
        let delivered = APNsResponse(status: 200, headers: [HTTP2HeaderField(name: "APNS-ID", value: "x")], body: [])
        #expect(delivered == APNsResponse(status: 200, apnsID: "x"))
    }

    @Test func toleratesBodiesThatAreNotAppleJSON() {
        for body in ["", "<html>", #"{"reason":5}"#, #"{"reason":"A","reason":"B"}"#, #"{"reason":"BadTopic"} x"#] {
            let response = APNsResponse(status: 500, headers: [], body: Array(body.utf8))
            #expect(response.status == 500)
            #expect(response.reason == nil)
        }
        let extra = APNsResponse(status: 400, headers: [],
                                 body: Array(#"{"x":[1,{"y":"]"}],"reason":"Bad\u0054opic","n":null}"#.utf8))
        #expect(extra.reason == .badTopic)
    }

    @Test func classifierTable() {
        let table: [(Int, APNsReason?, APNsResponseClass)] = [
            (200, nil, .delivered),
            (410, .unregistered, .rejected(invalidToken: true)),
            (410, .expiredToken, .rejected(invalidToken: true)),
            (400, .badDeviceToken, .rejected(invalidToken: true)),
            (400, .deviceTokenNotForTopic, .rejected(invalidToken: true)),
            (403, .expiredProviderToken, .refreshTokenAndRetry),
            (429, .tooManyRequests, .retry),
            (429, .tooManyProviderTokenUpdates, .retry),
            (500, .internalServerError, .retry),
            (503, .serviceUnavailable, .retry),
            (503, .shutdown, .retry),
            (503, nil, .retry),
            (400, .badTopic, .rejected(invalidToken: false)),
            (400, .payloadEmpty, .rejected(invalidToken: false)),
            (403, .invalidProviderToken, .rejected(invalidToken: false)),
            (403, .missingProviderToken, .rejected(invalidToken: false)),
            (404, .badPath, .rejected(invalidToken: false)),
            (405, .methodNotAllowed, .rejected(invalidToken: false)),
            (410, nil, .rejected(invalidToken: false)),
            (413, .payloadTooLarge, .rejected(invalidToken: false)),
            (400, .unknown("New"), .rejected(invalidToken: false)),
            (418, nil, .rejected(invalidToken: false)),
        ]
        for (status, reason, expected) in table {
            #expect(APNsResponseClassifier.classify(status: status, reason: reason) == expected,
                    "\(status) \(reason?.rawValue ?? "-")")
        }
        #expect(APNsResponseClassifier.classify(APNsResponse(status: 410, reason: .unregistered)) == .rejected(invalidToken: true))
    }

    /// A peer's kilobytes of `apns-id` or `reason` are cut to 256 bytes (whole characters) and
    /// `…`: every retrying notification and result record would otherwise carry them.
    @Test func longIDsAndReasonsAreCut() {
        let longID = String(repeating: "i", count: 8_000)
        let longReason = String(repeating: "é", count: 8_000)  // two bytes each
        let response = APNsResponse(
            status: 503, headers: [HTTP2HeaderField(name: "apns-id", value: longID), HTTP2HeaderField(name: "apns-unique-id", value: longID)],
            body: Array(#"{"reason":"\#(longReason)"}"#.utf8))
        #expect(response.apnsID == String(repeating: "i", count: 256) + "…")
        #expect(response.apnsUniqueID == String(repeating: "i", count: 256) + "…")
        #expect(response.reason?.rawValue == String(repeating: "é", count: 128) + "…")
        // Apple's own are kept as they are.
        let apple = APNsResponse(status: 400, headers: [HTTP2HeaderField(name: "apns-id", value: "0E9C5B4A-8C2D-4A5E-9F3B-1D2E3F4A5B6C")],
                                 body: Array(#"{"reason":"BadDeviceToken"}"#.utf8))
        #expect(apple.apnsID == "0E9C5B4A-8C2D-4A5E-9F3B-1D2E3F4A5B6C")
        #expect(apple.reason == .badDeviceToken)
    }
}
