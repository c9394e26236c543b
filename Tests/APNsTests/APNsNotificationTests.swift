import CNGHTTP2
import HTTP2
import Testing
@testable import APNs

@Suite struct APNsNotificationTests {
    @Test func pushTypeSuffixesFollowTheContract() {
        let expected: [APNsPushType: String] = [
            .alert: "", .background: "", .mdm: "", .voip: ".voip", .complication: ".complication",
            .fileprovider: ".pushkit.fileprovider", .liveactivity: ".push-type.liveactivity",
            .location: ".location-query", .pushtotalk: ".voip-ptt", .widgets: ".push-type.widgets",
            .controls: ".push-type.controls",
        ]
        #expect(APNsPushType.allCases.count == 11)
        for type in APNsPushType.allCases {
            #expect(type.topicSuffix == expected[type])
            #expect(type.topic(bundleID: "com.example.chat") == "com.example.chat" + (expected[type] ?? "?"))
        }
    }

    @Test func defaultPrioritiesAndPayloadLimits() {
        for type in APNsPushType.allCases {
            #expect(type.defaultPriority == (type == .background ? 5 : 10))
            #expect(type.maximumPayloadBytes == (type == .voip ? 5120 : 4096))
        }
        #expect(APNsNotification(token: sampleToken, pushType: .background, topic: sampleTopic, payload: []).priority == 5)
        #expect(APNsNotification(token: sampleToken, topic: sampleTopic, payload: []).priority == 10)
        #expect(APNsEnvironment.production.host == "api.push.apple.com")
        #expect(APNsEnvironment.sandbox.host == "api.sandbox.push.apple.com")
    }

    @Test func buildsTheRequestWithEveryHeader() {
        let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        let notification = APNsNotification(
            token: sampleToken, pushType: .voip, priority: 5, expiration: 0, collapseID: "c1",
            topic: "com.example.chat.voip", apnsID: "0e9c4a5e-7f1b-4c3d-9a2e-1b2c3d4e5f60", payload: payload)
        let request = notification.makeRequest(authorization: "bearer jwt", includeContentType: true)
        #expect(request.path == "/3/device/" + sampleToken)
        #expect(request.body == payload)
        let headers = request.headers.map { "\($0.name): \($0.value)" }
        #expect(headers == [
            "authorization: bearer jwt", "apns-push-type: voip", "apns-priority: 5", "apns-topic: com.example.chat.voip",
            "apns-expiration: 0", "apns-collapse-id: c1", "apns-id: 0e9c4a5e-7f1b-4c3d-9a2e-1b2c3d4e5f60",
            "content-type: application/json",
        ])
    }

    /// The pool writes the fields straight into the header block; they are the request's.
    @Test func theHeaderBlockGetsExactlyTheRequestsFields() {
        let notifications = [
            APNsNotification(token: sampleToken, pushType: .voip, priority: 5, expiration: 1_900_000_000, collapseID: "c1",
                             topic: "com.example.chat.voip", apnsID: "0e9c4a5e-7f1b-4c3d-9a2e-1b2c3d4e5f60", payload: [0x7B, 0x7D]),
            APNsNotification(token: sampleToken, topic: sampleTopic, payload: [0x7B, 0x7D]),
        ]
        for notification in notifications {
            for authorization in ["bearer a.b.c", nil] {
                let request = notification.makeRequest(authorization: authorization)
                var size = APNsRequestFieldSize()
                notification.writeRequestFields(into: &size, authorization: authorization)
                let (remaining, fields) = HeaderBlock.with(fieldCount: size.fieldCount, byteCapacity: size.byteCount) { block in
                    notification.writeRequestFields(into: &block, authorization: authorization)
                    let fields = UnsafeBufferPointer(start: block.nameValues, count: block.count).map {
                        String(decoding: UnsafeBufferPointer(start: $0.name, count: $0.namelen), as: UTF8.self) + ": " +
                            String(decoding: UnsafeBufferPointer(start: $0.value, count: $0.valuelen), as: UTF8.self)
                    }
                    return (block.remainingCapacity, fields)
                }
                #expect(remaining == 0)
                #expect(fields == [":path: \(request.path)"] + request.headers.map { "\($0.name): \($0.value)" })
            }
        }
    }

    /// APNs applies priority 10 when `apns-priority` is absent, so only 5 and 1 are sent.
    @Test func sendsThePriorityOnlyWhenItIsNotAPNsDefault() {
        func priorityHeader(_ pushType: APNsPushType, _ priority: Int?) -> [String] {
            APNsNotification(token: sampleToken, pushType: pushType, priority: priority, topic: sampleTopic, payload: [])
                .makeRequest(authorization: nil).headers.filter { $0.name == "apns-priority" }.map(\.value)
        }
        #expect(priorityHeader(.alert, nil) == [])
        #expect(priorityHeader(.alert, 10) == [])
        #expect(priorityHeader(.alert, 5) == ["5"])
        #expect(priorityHeader(.alert, 1) == ["1"])
        #expect(priorityHeader(.background, nil) == ["5"])
        #expect(priorityHeader(.background, 10) == [])
    }

    @Test func omitsOptionalHeadersAndAuthorizationForCertificateAuth() {
        let notification = APNsNotification(token: sampleToken, topic: sampleTopic, payload: [0x7B, 0x7D])
        let request = notification.makeRequest(authorization: nil)
        #expect(request.headers.map(\.name) == ["apns-push-type", "apns-topic"])
        #expect(request.headers.allSatisfy { $0.name == $0.name.lowercased() })
    }
}
