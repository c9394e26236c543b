#ifndef APNS_BRIDGE_CRDKAFKA_SHIM_H
#define APNS_BRIDGE_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdint.h>
#include <sys/types.h>
/* Variadic functions and macros of librdkafka are wrapped here as static inline functions,
   because Swift imports neither. */

/* Message flags (macros in rdkafka.h). */
static inline int apnsb_rd_kafka_msg_f_copy(void) { return RD_KAFKA_MSG_F_COPY; }

/* Partition and offset sentinels (cast macros in rdkafka.h). */
static inline int32_t apnsb_rd_kafka_partition_ua(void) { return RD_KAFKA_PARTITION_UA; }
static inline int64_t apnsb_rd_kafka_offset_beginning(void) { return RD_KAFKA_OFFSET_BEGINNING; }
static inline int64_t apnsb_rd_kafka_offset_invalid(void) { return RD_KAFKA_OFFSET_INVALID; }

/* Purge flags for rd_kafka_purge(). */
static inline int apnsb_rd_kafka_purge_queue_and_inflight(void) {
    return RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT;
}

/* rd_kafka_vu_t builders for rd_kafka_produceva (the array form of the variadic
   rd_kafka_producev and its RD_KAFKA_V_* macros). */
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_topic(const char *topic) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_TOPIC;
    vu.u.cstr = topic;
    return vu;
}
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_rkt(rd_kafka_topic_t *rkt) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_RKT;
    vu.u.rkt = rkt;
    return vu;
}
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_value(const void *bytes, size_t size) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_VALUE;
    vu.u.mem.ptr = (void *)bytes; /* not written: RD_KAFKA_MSG_F_COPY copies it */
    vu.u.mem.size = size;
    return vu;
}
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_key(const void *bytes, size_t size) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_KEY;
    vu.u.mem.ptr = (void *)bytes; /* not written: keys are always copied */
    vu.u.mem.size = size;
    return vu;
}
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_opaque(uint64_t tag) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_OPAQUE;
    vu.u.ptr = (void *)(uintptr_t)tag; /* the tag travels in the pointer bits, never dereferenced */
    return vu;
}
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_msgflags(int flags) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vu.u.i = flags;
    return vu;
}
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_header(const char *name, const void *value, ssize_t size) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_HEADER;
    vu.u.header.name = name;
    vu.u.header.val = value;
    vu.u.header.size = size;
    return vu;
}

static inline rd_kafka_vu_t apnsb_rd_kafka_vu_timestamp(int64_t milliseconds) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_TIMESTAMP;
    vu.u.i64 = milliseconds;
    return vu;
}
static inline rd_kafka_vu_t apnsb_rd_kafka_vu_partition(int32_t partition) {
    rd_kafka_vu_t vu;
    vu.vtype = RD_KAFKA_VTYPE_PARTITION;
    vu.u.i32 = partition;
    return vu;
}

/* The per-message opaque of a delivery report, as the tag it was produced with. */
static inline uint64_t apnsb_rd_kafka_message_tag(const rd_kafka_message_t *message) {
    return (uint64_t)(uintptr_t)message->_private;
}

/* One error, answered `rtt_ms` late, for the next request of `api_key` that broker `broker_id`
   of a mock cluster receives: rd_kafka_mock_broker_push_request_error_rtts is variadic. */
static inline rd_kafka_resp_err_t apnsb_rd_kafka_mock_broker_push_request_error(
    rd_kafka_mock_cluster_t *cluster, int32_t broker_id, int16_t api_key, rd_kafka_resp_err_t error,
    int32_t rtt_ms) {
    return rd_kafka_mock_broker_push_request_error_rtts(cluster, broker_id, api_key, 1, error, rtt_ms);
}

#endif
