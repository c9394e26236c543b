#ifndef APNS_BRIDGE_CNGHTTP2_SHIM_H
#define APNS_BRIDGE_CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>

/* Linux event-loop headers that Swift's Glibc module does not export; the HTTP2 module's
   EventLoop (the only user of this target) needs them next to nghttp2. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>

/* Names the calling thread (prctl is variadic, so Swift cannot call it directly). */
static inline int apns_set_current_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
#endif
