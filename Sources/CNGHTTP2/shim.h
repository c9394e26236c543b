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

/* epoll_pwait2 with the timeout in nanoseconds (negative: none). Fails with ENOSYS on kernels
   before Linux 5.11. */
static inline int apns_epoll_wait_nanoseconds(int epfd, struct epoll_event *events, int maxevents,
                                              long long timeout_nanoseconds) {
    if (timeout_nanoseconds < 0) {
        return epoll_pwait2(epfd, events, maxevents, NULL, NULL);
    }
    struct timespec timeout = { .tv_sec = timeout_nanoseconds / 1000000000LL,
                                .tv_nsec = timeout_nanoseconds % 1000000000LL };
    return epoll_pwait2(epfd, events, maxevents, &timeout, NULL);
}
#endif
