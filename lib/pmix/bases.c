//go:build pmix

// The libevent bases that libpmix makes. These definitions of
// event_base_new/event_base_free come before libevent's in symbol
// resolution (the executable exports them; libpmix calls them through its
// PLT), as accept in cloexec.c: they keep a list of the bases, so that
// requestor.c can find a client's socket and closesock.c the events of a
// socket that libpmix closes. Only libevent's public API is used.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include "bases.h"

#define DYN_MAX_BASES 16

static pthread_mutex_t bases_mu = PTHREAD_MUTEX_INITIALIZER;
static struct event_base *bases[DYN_MAX_BASES];

struct event_base *event_base_new(void);
void event_base_free(struct event_base *b);

struct event_base *event_base_new(void)
{
    static struct event_base *(*real)(void);
    struct event_base *b;
    int i;

    if (real == NULL)
        real = (struct event_base * (*)(void)) dlsym(RTLD_NEXT, "event_base_new");
    if (real == NULL)
        return NULL;
    b = real();
    if (b != NULL) {
        pthread_mutex_lock(&bases_mu);
        for (i = 0; i < DYN_MAX_BASES; i++) {
            if (bases[i] == NULL) {
                bases[i] = b;
                break;
            }
        }
        pthread_mutex_unlock(&bases_mu);
    }
    return b;
}

void event_base_free(struct event_base *b)
{
    static void (*real)(struct event_base *);
    int i;

    pthread_mutex_lock(&bases_mu);
    for (i = 0; i < DYN_MAX_BASES; i++) {
        if (bases[i] == b)
            bases[i] = NULL;
    }
    pthread_mutex_unlock(&bases_mu);
    if (real == NULL)
        real = (void (*)(struct event_base *))dlsym(RTLD_NEXT, "event_base_free");
    if (real != NULL)
        real(b);
}

static struct dyn_libevent api;
static int api_ok;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void load_api(void)
{
    api.foreach_event = (int (*)(struct event_base *, dyn_foreach_cb, void *))dlsym(RTLD_DEFAULT, "event_base_foreach_event");
    api.callback_arg = (void *(*)(const struct event *))dlsym(RTLD_DEFAULT, "event_get_callback_arg");
    api.fd_of = (int (*)(const struct event *))dlsym(RTLD_DEFAULT, "event_get_fd");
    api.events_of = (short (*)(const struct event *))dlsym(RTLD_DEFAULT, "event_get_events");
    api.del = (int (*)(struct event *))dlsym(RTLD_DEFAULT, "event_del");
    api_ok = api.foreach_event != NULL && api.callback_arg != NULL && api.fd_of != NULL &&
             api.events_of != NULL && api.del != NULL;
}

const struct dyn_libevent *dyn_libevent(void)
{
    pthread_once(&api_once, load_api);
    return api_ok ? &api : NULL;
}

void dyn_each_base(int (*fn)(struct event_base *, void *), void *arg)
{
    int i;

    pthread_mutex_lock(&bases_mu);
    for (i = 0; i < DYN_MAX_BASES; i++) {
        if (bases[i] != NULL && fn(bases[i], arg))
            break;
    }
    pthread_mutex_unlock(&bases_mu);
}
