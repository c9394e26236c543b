import COpenSSL

/// Reading the client certificate a TLS server verified, and what APNs takes from it.
enum ClientCertificate {
    /// The subject of the peer's certificate as (short name, value) entries, e.g. `("UID",
    /// "com.example.app")`, `("CN", "Apple Push Services: com.example.app")`; nil when the peer
    /// presented none. Call after a successful handshake (the server verified the chain).
    static func subject(of ssl: OpaquePointer) -> [(name: String, value: String)]? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard let name = X509_get_subject_name(certificate) else { return [] }
        var entries: [(name: String, value: String)] = []
        for index in 0..<X509_NAME_entry_count(name) {
            guard let entry = X509_NAME_get_entry(name, index),
                  let object = X509_NAME_ENTRY_get_object(entry),
                  let data = X509_NAME_ENTRY_get_data(entry),
                  let bytes = ASN1_STRING_get0_data(data) else { continue }
            let nid = OBJ_obj2nid(object)
            let shortName = OBJ_nid2sn(nid).map { String(cString: $0) } ?? "\(nid)"
            let value = String(decoding: UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(data))), as: UTF8.self)
            entries.append((shortName, value))
        }
        return entries
    }

    /// Prefixes of the common name of Apple's push certificates, before the bundle id.
    static let applePushCommonNamePrefixes = [
        "Apple Push Services: ", "Apple Production IOS Push Services: ", "Apple Development IOS Push Services: ",
    ]

    /// The bundle id a push certificate is for: its `UID` entry (Apple's certificates carry it),
    /// else its common name without Apple's "Apple Push Services: " style prefix.
    static func bundleID(fromSubject subject: [(name: String, value: String)]) -> String? {
        if let uid = subject.first(where: { $0.name == "UID" })?.value, !uid.isEmpty { return uid }
        guard var commonName = subject.first(where: { $0.name == "CN" })?.value, !commonName.isEmpty else { return nil }
        for prefix in applePushCommonNamePrefixes where commonName.hasPrefix(prefix) {
            commonName.removeFirst(prefix.count)
            break
        }
        return commonName
    }
}
