#ifndef APNS_BRIDGE_COPENSSL_SHIM_H
#define APNS_BRIDGE_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/bio.h>
#include <openssl/ecdsa.h>
#include <openssl/provider.h>

/* OpenSSL macros wrapped as functions, because Swift does not import function-like macros. */
static inline long apns_ssl_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline int apns_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
static inline int apns_ssl_ctx_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
static inline long apns_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
static inline long apns_ssl_set_mode(SSL *ssl, long mode) {
    return SSL_set_mode(ssl, mode);
}
static inline int apns_bio_get_mem_data(BIO *bio, char **data) {
    return (int)BIO_get_mem_data(bio, data);
}
static inline long apns_ssl_ctx_set_read_ahead(SSL_CTX *ctx, int yes) {
    return SSL_CTX_set_read_ahead(ctx, yes);
}
static inline long apns_ssl_ctx_add1_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return SSL_CTX_add1_chain_cert(ctx, cert);
}
/* Renegotiation off (RFC 9113 §9.2.1 forbids it under HTTP/2): a HelloRequest is answered with a
 * no_renegotiation alert, never with a handshake. */
static inline void apns_ssl_ctx_disable_renegotiation(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
}
static inline int apns_ssl_ctx_renegotiation_disabled(const SSL_CTX *ctx) {
    return (SSL_CTX_get_options(ctx) & SSL_OP_NO_RENEGOTIATION) != 0;
}
#endif
