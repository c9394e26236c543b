import APNs
import Metrics
import Observability

extension NotificationDispatcher {
    /// Configured apps whose pool for their configured environment has no connection ready for
    /// notifications (any thread; `/readyz`). An app whose pool is not made yet counts as not ready.
    func appsWithoutReadyConnection() -> [String] {
        let pools = poolDirectory.withLock { $0 }
        return configuration.apps.compactMap { app in
            let ready = pools.contains { pool in
                pool.app == app.name && pool.environment == app.environment && pool.client.hasReadyConnection
            }
            return ready ? nil : app.name
        }
    }

    /// `apns_bridge_connections{app,state}`: every state of every configured app (zeros
    /// included), summed over the app's pools (any thread).
    func connectionSamples() -> [MetricSample] {
        let pools = poolDirectory.withLock { $0 }
        var samples: [MetricSample] = []
        for app in configuration.apps {
            var counts: [APNsConnectionStateName: Int] = [:]
            for pool in pools where pool.app == app.name {
                counts.merge(pool.client.connectionStates, uniquingKeysWith: +)
            }
            for state in APNsConnectionStateName.allCases {
                samples.append(MetricSample(labels: [("app", app.name), ("state", state.rawValue)],
                                            value: Double(counts[state, default: 0])))
            }
        }
        return samples
    }
}
