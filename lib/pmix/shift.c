//go:build pmix

// libpmix 4.2 completes some host operations without moving to its own
// thread first: the completions of queries and lookups (query_cbfunc,
// lookup_cbfunc in pmix_server.c) queue the reply on the client's
// connection directly, which only libpmix's progress thread may touch.
// Called from a goroutine, they race with that thread (a reply lost or
// sent twice, a corrupted send queue). So Go hands those completions to
// dyn_shift, which runs them on the progress thread through libevent, as
// libpmix's own PMIX_THREADSHIFT does.
//
// The progress thread's base comes from pmix_progress_thread_init(NULL),
// which returns the shared progress thread's base (and counts one more
// user, given back at once with pmix_progress_thread_stop(NULL)). Both are
// exported by libpmix but not in its public headers: they are looked up
// at run time, and without them dyn_shift runs the completion at once, as
// before.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include "shift.h"

struct event_base;
struct timeval;

#define DYN_EV_TIMEOUT 0x01 /* libevent's EV_TIMEOUT */

static struct event_base *progress;
static int (*base_once)(struct event_base *, int, short, void (*)(int, short, void *), void *,
                        const struct timeval *);

int dyn_shift_init(void)
{
    struct event_base *(*init)(const char *);
    int (*stop)(const char *);

    init = (struct event_base * (*)(const char *)) dlsym(RTLD_DEFAULT, "pmix_progress_thread_init");
    stop = (int (*)(const char *))dlsym(RTLD_DEFAULT, "pmix_progress_thread_stop");
    base_once = (int (*)(struct event_base *, int, short, void (*)(int, short, void *), void *,
                         const struct timeval *))dlsym(RTLD_DEFAULT, "event_base_once");
    if (init == NULL || stop == NULL || base_once == NULL)
        return 0;
    progress = init(NULL);
    stop(NULL);
    return progress != NULL;
}

struct shifted {
    void (*fn)(void *);
    void *arg;
};

static void run_shifted(int fd, short what, void *arg)
{
    struct shifted *s = arg;
    (void)fd;
    (void)what;
    s->fn(s->arg);
    free(s);
}

void dyn_shift(void (*fn)(void *), void *arg)
{
    struct shifted *s;

    if (progress != NULL && (s = malloc(sizeof *s)) != NULL) {
        s->fn = fn;
        s->arg = arg;
        /* No descriptor, no delay: the event is made active at once and
         * the progress thread woken (libevent is thread-safe here:
         * libpmix enables its pthreads support). */
        if (0 == base_once(progress, -1, DYN_EV_TIMEOUT, run_shifted, s, NULL))
            return;
        free(s);
    }
    fn(arg);
}

static pthread_t host_thread;
static int host_thread_known;
static long completions, elsewhere;

void dyn_note_host_thread(void)
{
    if (!__atomic_load_n(&host_thread_known, __ATOMIC_ACQUIRE)) {
        host_thread = pthread_self();
        __atomic_store_n(&host_thread_known, 1, __ATOMIC_RELEASE);
    }
}

void dyn_count_completion(void)
{
    __atomic_add_fetch(&completions, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&host_thread_known, __ATOMIC_ACQUIRE) && !pthread_equal(pthread_self(), host_thread))
        __atomic_add_fetch(&elsewhere, 1, __ATOMIC_RELAXED);
}

void dyn_completions(long *all, long *other)
{
    *all = __atomic_load_n(&completions, __ATOMIC_RELAXED);
    *other = __atomic_load_n(&elsewhere, __ATOMIC_RELAXED);
}
