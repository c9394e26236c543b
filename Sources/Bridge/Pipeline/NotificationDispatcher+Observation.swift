import APNs
import Metrics

extension NotificationDispatcher {
    /// Configured apps none of whose pools has a connection ready for notifications (any thread).
    func appsWithoutReadyConnection() -> [String] {
        []
    }

    /// `apns_bridge_connections{app,state}` samples from every pool (any thread).
    func connectionSamples() -> [MetricSample] {
        []
    }
}
