//go:build pmix

// libpmix 4.2 closes a client's socket without removing the socket's
// events from libevent when the host deregisters a client that is still
// connected (pmix_server.c _deregister_client: the daemon deregisters a
// process once it has exited, often before libpmix has read the end of
// its connection). libevent then still believes that descriptor is
// watched, although the kernel dropped it from epoll at the close: the
// next client whose connection gets the same descriptor number is never
// read, and hangs in PMIx_Init (TestDeregisterConnected).
//
// libpmix closes sockets with shutdown(2) then close(2). This shutdown
// comes before libc's in symbol resolution (the executable exports it, as
// accept in cloexec.c) and first removes every event that libpmix's bases
// hold on that descriptor. Removing an event twice is harmless, so
// libpmix's own removals, before or after, are unaffected. Go's sockets
// do not go through libc and are unaffected.

#include <sys/syscall.h>
#include <unistd.h>
#include "bases.h"

#define DYN_MAX_FD_EVENTS 8

struct fd_events {
    int fd;
    int n;
    struct event *evs[DYN_MAX_FD_EVENTS];
    const struct dyn_libevent *le;
};

static int collect(const struct event_base *b, const struct event *ev, void *arg)
{
    struct fd_events *s = arg;
    (void)b;
    if (s->le->fd_of(ev) == s->fd && s->n < DYN_MAX_FD_EVENTS)
        s->evs[s->n++] = (struct event *)ev;
    return 0;
}

static int forget_on(struct event_base *b, void *arg)
{
    struct fd_events *s = arg;
    int i;

    s->n = 0;
    /* Collected first: an event must not be removed while the base is
     * walked. */
    s->le->foreach_event(b, collect, s);
    for (i = 0; i < s->n; i++)
        s->le->del(s->evs[i]);
    return 0;
}

int shutdown(int fd, int how);

int shutdown(int fd, int how)
{
    struct fd_events s = {.fd = fd};

    if (fd >= 0 && (s.le = dyn_libevent()) != NULL)
        dyn_each_base(forget_on, &s);
    return (int)syscall(SYS_shutdown, fd, how);
}
