/*
 * ThreadSanitizer and librdkafka: Debian's librdkafka creates its threads with C11 `thrd_create`
 * and locks with `mtx_*` / `cnd_*`. glibc implements those on its internal pthread entry points,
 * which ThreadSanitizer does not intercept (this toolchain's runtime has no `thrd_create`
 * interceptor): librdkafka's threads start without sanitizer state and crash in the sanitizer's
 * allocator, and its locks are invisible. `make tsan` preloads this file, built as a shared
 * library, so that those calls go through the intercepted pthread functions instead. Only for
 * the ThreadSanitizer run; never linked into the product.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

struct thread_start { thrd_start_t function; void *argument; };

static void *start_thread(void *raw) {
    struct thread_start start = *(struct thread_start *)raw;
    free(raw);
    return (void *)(intptr_t)start.function(start.argument);
}

static int thread_result(int error) {
    if (error == 0) return thrd_success;
    if (error == ENOMEM) return thrd_nomem;
    if (error == EBUSY) return thrd_busy;
    if (error == ETIMEDOUT) return thrd_timedout;
    return thrd_error;
}

int thrd_create(thrd_t *thread, thrd_start_t function, void *argument) {
    struct thread_start *start = malloc(sizeof *start);
    if (start == NULL) return thrd_nomem;
    start->function = function;
    start->argument = argument;
    int error = pthread_create((pthread_t *)thread, NULL, start_thread, start);
    if (error != 0) free(start);
    return thread_result(error);
}

int thrd_join(thrd_t thread, int *result) {
    void *value = NULL;
    int error = pthread_join((pthread_t)thread, &value);
    if (error == 0 && result != NULL) *result = (int)(intptr_t)value;
    return thread_result(error);
}

int thrd_detach(thrd_t thread) { return thread_result(pthread_detach((pthread_t)thread)); }

int mtx_init(mtx_t *mutex, int type) {
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
    int error = pthread_mutex_init((pthread_mutex_t *)mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return thread_result(error);
}
int mtx_lock(mtx_t *mutex) { return thread_result(pthread_mutex_lock((pthread_mutex_t *)mutex)); }
int mtx_trylock(mtx_t *mutex) { return thread_result(pthread_mutex_trylock((pthread_mutex_t *)mutex)); }
int mtx_timedlock(mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    return thread_result(pthread_mutex_timedlock((pthread_mutex_t *)mutex, deadline));
}
int mtx_unlock(mtx_t *mutex) { return thread_result(pthread_mutex_unlock((pthread_mutex_t *)mutex)); }
void mtx_destroy(mtx_t *mutex) { pthread_mutex_destroy((pthread_mutex_t *)mutex); }

int cnd_init(cnd_t *condition) { return thread_result(pthread_cond_init((pthread_cond_t *)condition, NULL)); }
int cnd_signal(cnd_t *condition) { return thread_result(pthread_cond_signal((pthread_cond_t *)condition)); }
int cnd_broadcast(cnd_t *condition) { return thread_result(pthread_cond_broadcast((pthread_cond_t *)condition)); }
int cnd_wait(cnd_t *condition, mtx_t *mutex) {
    return thread_result(pthread_cond_wait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex));
}
int cnd_timedwait(cnd_t *restrict condition, mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    return thread_result(pthread_cond_timedwait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex, deadline));
}
void cnd_destroy(cnd_t *condition) { pthread_cond_destroy((pthread_cond_t *)condition); }
