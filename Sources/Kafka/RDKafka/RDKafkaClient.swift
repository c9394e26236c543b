import CRdKafka
import Observability
import Synchronization

/// Owns one `rd_kafka_t` and the ``RDKafkaClientContext`` its callbacks use.
///
/// The context is retained for as long as the handle exists: librdkafka may call `log_cb` from
/// its own threads until `rd_kafka_destroy` returns.
final class RDKafkaClient: @unchecked Sendable {
    /// Producer or consumer.
    enum Kind {
        case producer, consumer

        var cType: rd_kafka_type_t { self == .producer ? RD_KAFKA_PRODUCER : RD_KAFKA_CONSUMER }
    }

    /// The handle. Valid until ``destroy()``; asked for after it, the process stops rather
    /// than hand librdkafka freed memory.
    var pointer: OpaquePointer {
        // invariant: every caller checks its client's own state (a gate, a phase) before it
        // reaches the handle, and `destroy` comes after those are shut.
        precondition(!isDestroyed.load(ordering: .relaxed), "RDKafkaClient: the librdkafka handle was used after rd_kafka_destroy")
        return handle
    }
    private let handle: OpaquePointer
    /// What the callbacks reach through the opaque.
    let context: RDKafkaClientContext
    private let retainedContext: Unmanaged<RDKafkaClientContext>
    /// Read on every thread that uses the handle, set once by `destroy` (which may run in the
    /// `deinit` of whichever thread lets the client go): an atomic, so no read races the write.
    private let isDestroyed = Atomic<Bool>(false)

    /// Creates a client from `properties`, applied in order, and registers the callbacks.
    ///
    /// - Throws: ``KafkaError`` naming the property that librdkafka rejected (never its value),
    ///   or librdkafka's reason when `rd_kafka_new` fails.
    init(kind: Kind, properties: [(name: String, value: String)], context: RDKafkaClientContext) throws {
        // invariant: rd_kafka_conf_new only returns NULL when out of memory.
        let conf = rd_kafka_conf_new()!
        do {
            try RDKafkaClient.apply(properties, to: conf)
        } catch {
            rd_kafka_conf_destroy(conf)
            throw error
        }
        context.keepSecrets(of: properties)
        let retained = Unmanaged.passRetained(context)
        rd_kafka_conf_set_opaque(conf, retained.toOpaque())
        RDKafkaClient.registerCallbacks(kind: kind, on: conf)

        var errorText = [CChar](repeating: 0, count: 512)
        // rd_kafka_new takes ownership of conf only when it succeeds.
        guard let handle = rd_kafka_new(kind.cType, conf, &errorText, errorText.count) else {
            rd_kafka_conf_destroy(conf)
            retained.release()
            throw KafkaError.configuration("could not create the Kafka client: \(context.redacting(String(cBuffer: errorText)))")
        }
        self.handle = handle
        self.context = context
        retainedContext = retained
    }

    deinit {
        destroy()
    }

    /// `rd_kafka_destroy`, then releases the context. Idempotent. `skippingConsumerClose`: a
    /// consumer whose close did not finish in time is destroyed without librdkafka's own close
    /// (`RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE`), which would wait for the group again.
    func destroy(skippingConsumerClose: Bool = false) {
        guard !isDestroyed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        rd_kafka_destroy_flags(handle, skippingConsumerClose ? RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE : 0)
        retainedContext.release()
    }

    /// The fatal error librdkafka raised on this client, if any (`rd_kafka_fatal_error`).
    func pendingFatalError() -> KafkaError? {
        var text = [CChar](repeating: 0, count: 512)
        let code = rd_kafka_fatal_error(pointer, &text, text.count)
        guard code != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(code: code.rawValue, message: context.redacting(String(cBuffer: text)), isFatal: true, isRetriable: false)
    }

    /// The value the client runs with for property `name`, as librdkafka writes it (integers in
    /// decimal, whatever spelling was given: it reads them with `strtol`, so "0500000" is octal);
    /// nil for an unknown property.
    func effectiveProperty(_ name: String) -> String? {
        guard let conf = rd_kafka_conf(pointer) else { return nil }
        var size = 0
        guard rd_kafka_conf_get(conf, name, nil, &size) == RD_KAFKA_CONF_OK, size > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: size)
        guard rd_kafka_conf_get(conf, name, &buffer, &size) == RD_KAFKA_CONF_OK else { return nil }
        return String(cBuffer: buffer)
    }

    /// Sets each property with `rd_kafka_conf_set`.
    static func apply(_ properties: [(name: String, value: String)], to conf: OpaquePointer) throws {
        var errorText = [CChar](repeating: 0, count: 512)
        for (name, value) in properties {
            let result = rd_kafka_conf_set(conf, name, value, &errorText, errorText.count)
            switch result {
            case RD_KAFKA_CONF_OK:
                continue
            case RD_KAFKA_CONF_UNKNOWN:
                throw KafkaError.configuration("unknown Kafka configuration property \"\(name)\"")
            default:
                // librdkafka's text quotes the value, which may be a secret (sasl.password): not shown.
                throw KafkaError.configuration("invalid value for Kafka configuration property \"\(name)\"")
            }
        }
    }
}

extension String {
    /// A string from a NUL-terminated C buffer.
    init(cBuffer buffer: [CChar]) {
        self = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }  // invariant: non-empty buffer
    }
}
