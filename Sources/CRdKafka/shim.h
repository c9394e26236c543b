#ifndef APNS_BRIDGE_CRDKAFKA_SHIM_H
#define APNS_BRIDGE_CRDKAFKA_SHIM_H
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
/* Variadic functions and macros of librdkafka are wrapped here as static inline functions,
   because Swift imports neither. */
#endif
