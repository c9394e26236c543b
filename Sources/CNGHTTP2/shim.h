#ifndef APNS_BRIDGE_CNGHTTP2_SHIM_H
#define APNS_BRIDGE_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
#endif
