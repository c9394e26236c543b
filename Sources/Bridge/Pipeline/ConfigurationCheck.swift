/// Checks that go beyond parsing: every app's credentials can be loaded.
public enum ConfigurationCheck {
    /// Loads every app's key or certificate files and TLS settings.
    /// - Throws: `PipelineError` naming the app (`apps.<name>.auth`) and the problem.
    public static func loadCredentials(_ configuration: BridgeConfiguration) throws(PipelineError) {
        for app in configuration.apps {
            _ = try AppCredentials(app: app, caFile: configuration.apns.caFile)
        }
    }
}
