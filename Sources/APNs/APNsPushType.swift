/// The `apns-push-type` of a notification (contract §2).
public enum APNsPushType: String, Sendable, CaseIterable, Hashable {
    case alert, background, location, voip, complication, fileprovider, mdm, liveactivity, pushtotalk, widgets, controls

    /// The suffix Apple requires after the bundle id in `apns-topic` for this push type ("" for none).
    /// `mdm` has none: its topic is the UID from the MDM certificate, which callers pass as the topic.
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .location: ".location-query"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// The default `apns-priority`: 5 for background (Apple requires it), 10 otherwise.
    public var defaultPriority: Int {
        self == .background ? 5 : 10
    }

    /// Apple's payload limit in bytes: 5120 for VoIP, 4096 otherwise.
    public var maximumPayloadBytes: Int {
        self == .voip ? 5120 : 4096
    }

    /// The default `apns-topic` for an app: its bundle id plus `topicSuffix`. Without a suffix it
    /// is the bundle id itself (shared, not a new string per notification).
    public func topic(bundleID: String) -> String {
        let suffix = topicSuffix
        return suffix.isEmpty ? bundleID : bundleID + suffix
    }
}

/// The APNs environment a notification goes to.
public enum APNsEnvironment: String, Sendable, CaseIterable, Hashable {
    case production, sandbox

    /// Apple's host for this environment (port 443, or 2197).
    public var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        }
    }
}
