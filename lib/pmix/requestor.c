//go:build pmix

// Who asks a query. libpmix (4.2.2, and every release up to 6.0.0) loses
// the client behind a PMIx_Query_info: the server's pmix_server_query(peer,
// ...) hands the client's queries to PMIx_Query_info_nb as if the server
// itself asked, and the host's query callback gets the server's own name.
// With several jobs on one daemon, the host cannot tell whose process sets
// a process asks for unless it names its namespace in a qualifier.
//
// These definitions come before libpmix's in symbol resolution (the
// executable exports them; libpmix calls them through its PLT), as in
// cloexec.c;
//   - the libevent bases libpmix makes (bases.c) let a peer's socket be
//     found: the peer is the callback argument of its socket's read event;
//   - pmix_server_query notes, for its thread, the two ends of the
//     client's connection while it runs (libpmix 4 talks TCP over
//     loopback, so there are no peer credentials to ask);
//   - PMIx_Query_info_nb, which pmix_server_query calls in that thread,
//     adds them to each query as the qualifier DYN_REQUESTOR ("client
//     address, space, server address"), which the Go side (requestor.go)
//     turns into the client's name: the process holding that socket.
// Only public APIs are used (libpmix's and libevent's), no internal layout.
// Without the connection (a socket not found, not IPv4) nothing is added: the query is
// answered as before.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pmix_server.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include "bases.h"

#define DYN_REQUESTOR "dynrt.requestor" /* requestor.go requestorKey */

pmix_status_t pmix_server_query(void *peer, void *buf, pmix_info_cbfunc_t cbfunc, void *cbdata);

struct peer_search {
    void *peer;
    int fd;
    const struct dyn_libevent *le;
};

static int find_peer(const struct event_base *b, const struct event *ev, void *arg)
{
    struct peer_search *s = arg;
    (void)b;
    if (s->le->callback_arg(ev) == s->peer && (s->le->events_of(ev) & DYN_EV_READ) && s->le->fd_of(ev) >= 0) {
        s->fd = s->le->fd_of(ev);
        return 1; /* found: stop */
    }
    return 0;
}

static int search_base(struct event_base *b, void *arg)
{
    struct peer_search *s = arg;
    s->le->foreach_event(b, find_peer, s);
    return s->fd >= 0;
}

/* endpoint formats an IPv4 address and port as "a.b.c.d:port"; 0 if it
 * is not IPv4. */
static int endpoint(char *buf, size_t n, const struct sockaddr_in *a)
{
    char ip[INET_ADDRSTRLEN];

    if (a->sin_family != AF_INET || inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip) == NULL)
        return 0;
    snprintf(buf, n, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    return 1;
}

/* peer_conn writes the ends of peer's connection into buf ("client
 * server"), or leaves it empty. */
static void peer_conn(void *peer, char *buf, size_t n)
{
    struct peer_search s = {.peer = peer, .fd = -1};
    struct sockaddr_in remote, local;
    socklen_t rl = sizeof remote, ll = sizeof local;
    char r[64], l[64];

    buf[0] = '\0';
    if ((s.le = dyn_libevent()) == NULL)
        return;
    dyn_each_base(search_base, &s);
    if (s.fd < 0 || getpeername(s.fd, (struct sockaddr *)&remote, &rl) != 0 ||
        getsockname(s.fd, (struct sockaddr *)&local, &ll) != 0 || !endpoint(r, sizeof r, &remote) ||
        !endpoint(l, sizeof l, &local))
        return;
    snprintf(buf, n, "%s %s", r, l);
}

/* asking holds the connection of the client whose query this thread is
 * handing to PMIx_Query_info_nb ("": none). */
static __thread char asking[160];

pmix_status_t pmix_server_query(void *peer, void *buf, pmix_info_cbfunc_t cbfunc, void *cbdata)
{
    static pmix_status_t (*real)(void *, void *, pmix_info_cbfunc_t, void *);
    pmix_status_t rc;

    if (real == NULL)
        real = (pmix_status_t(*)(void *, void *, pmix_info_cbfunc_t, void *))dlsym(RTLD_NEXT, "pmix_server_query");
    if (real == NULL)
        return PMIX_ERR_NOT_SUPPORTED;
    peer_conn(peer, asking, sizeof asking);
    rc = real(peer, buf, cbfunc, cbdata);
    asking[0] = '\0';
    return rc;
}

/* with_requestor adds the qualifier DYN_REQUESTOR = conn to q. */
static void with_requestor(pmix_query_t *q, const char *conn)
{
    pmix_info_t *quals;
    size_t i;

    PMIX_INFO_CREATE(quals, q->nqual + 1);
    if (quals == NULL)
        return;
    for (i = 0; i < q->nqual; i++)
        PMIx_Info_xfer(&quals[i], &q->qualifiers[i]);
    PMIX_INFO_LOAD(&quals[q->nqual], DYN_REQUESTOR, conn, PMIX_STRING);
    PMIX_INFO_SET_QUALIFIER(&quals[q->nqual]);
    if (q->qualifiers != NULL)
        PMIX_INFO_FREE(q->qualifiers, q->nqual);
    q->qualifiers = quals;
    q->nqual++;
}

pmix_status_t PMIx_Query_info_nb(pmix_query_t queries[], size_t nqueries, pmix_info_cbfunc_t cbfunc, void *cbdata)
{
    static pmix_status_t (*real)(pmix_query_t *, size_t, pmix_info_cbfunc_t, void *);
    size_t i;

    if (real == NULL)
        real = (pmix_status_t(*)(pmix_query_t *, size_t, pmix_info_cbfunc_t, void *))dlsym(RTLD_NEXT, "PMIx_Query_info_nb");
    if (real == NULL)
        return PMIX_ERR_NOT_SUPPORTED;
    if (asking[0] != '\0' && queries != NULL) {
        for (i = 0; i < nqueries; i++)
            with_requestor(&queries[i], asking);
    }
    return real(queries, nqueries, cbfunc, cbdata);
}
