//go:build pmix

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include "glue.h"
#include "dyn.h"
#include "events.h"
#include "shift.h"
#include "_cgo_export.h"

// The host module. Each callback copies what Go needs and returns at
// once: the Go side answers on a goroutine of its own through cbfunc.

static pmix_status_t client_connected(const pmix_proc_t *proc, void *server_object,
                                      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object;
    dyn_note_host_thread();
    return dynGoClientConnected((char *)proc->nspace, proc->rank, cbfunc, cbdata);
}

static pmix_status_t client_finalized(const pmix_proc_t *proc, void *server_object,
                                      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object;
    return dynGoClientFinalized((char *)proc->nspace, proc->rank, cbfunc, cbdata);
}

static pmix_status_t abort_fn(const pmix_proc_t *proc, void *server_object, int status,
                              const char msg[], pmix_proc_t procs[], size_t nprocs,
                              pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)server_object;
    return dynGoAbort((char *)proc->nspace, proc->rank, status, (char *)msg, procs, nprocs,
                      cbfunc, cbdata);
}

static int info_true(const pmix_info_t info[], size_t ninfo, const char *key)
{
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], key)) {
            return PMIX_INFO_TRUE(&info[i]);
        }
    }
    return 0;
}

static pmix_status_t fence_nb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                              size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cbfunc,
                              void *cbdata)
{
    return dynGoFence((pmix_proc_t *)procs, nprocs, info_true(info, ninfo, PMIX_COLLECT_DATA),
                      data, ndata, cbfunc, cbdata);
}

static pmix_status_t direct_modex(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                  pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    (void)info;
    (void)ninfo;
    return dynGoDirectModex((char *)proc->nspace, proc->rank, cbfunc, cbdata);
}

/* The PMIX_PERSISTENCE of a publish: its value, -1 when none is given, -2
 * when it is not a pmix_persistence_t. */
static int publish_persistence(const pmix_info_t info[], size_t ninfo)
{
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_PERSISTENCE)) {
            return PMIX_PERSIST == info[i].value.type ? (int)info[i].value.data.persist : -2;
        }
    }
    return -1;
}

static pmix_status_t publish_fn(const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    return dynGoPublish((char *)proc->nspace, proc->rank, (pmix_info_t *)info, ninfo,
                        publish_persistence(info, ninfo), cbfunc, cbdata);
}

static int has_key(const pmix_info_t info[], size_t ninfo, const char *key)
{
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], key)) {
            return 1;
        }
    }
    return 0;
}

static pmix_status_t lookup_fn(const pmix_proc_t *proc, char **keys, const pmix_info_t info[],
                               size_t ninfo, pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
    dyn_note_host_thread();
    return dynGoLookup((char *)proc->nspace, proc->rank, keys, has_key(info, ninfo, PMIX_WAIT),
                       cbfunc, cbdata);
}

static pmix_status_t unpublish_fn(const pmix_proc_t *proc, char **keys, const pmix_info_t info[],
                                  size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)info;
    (void)ninfo;
    return dynGoUnpublish((char *)proc->nspace, proc->rank, keys, cbfunc, cbdata);
}

static pmix_status_t query_fn(pmix_proc_t *proct, pmix_query_t *queries, size_t nqueries,
                              pmix_info_cbfunc_t cbfunc, void *cbdata)
{
    dyn_note_host_thread();
    if (NULL == proct) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    return dynGoQuery(proct->nspace, proct->rank, queries, nqueries, cbfunc, cbdata);
}

static pmix_server_module_t module = {
    .client_connected = client_connected,
    .client_finalized = client_finalized,
    .abort = abort_fn,
    .fence_nb = fence_nb,
    .direct_modex = direct_modex,
    .publish = publish_fn,
    .lookup = lookup_fn,
    .unpublish = unpublish_fn,
    .spawn = dyn_spawn_fn,
    .connect = dyn_connect_fn,
    .disconnect = dyn_disconnect_fn,
    .notify_event = dyn_notify_event_fn,
    .query = query_fn,
    .job_control = dyn_job_control_fn,
};

pmix_status_t dyn_server_init(const char *tmpdir, const char *nspace, uint32_t rank)
{
    pmix_info_t *info;
    size_t n = 5;
    pmix_rank_t r = rank;
    bool no = false, yes = true;
    pmix_status_t rc;
    sigset_t pipe, old;

    // Job data in the server's own memory (gds/hash), not in shared
    // memory segments under the server's directory (gds/ds21, ds12).
    // A choice made in the environment (PMIX_MCA_gds) stands.
    setenv("PMIX_MCA_gds", "hash", 0);
    PMIX_INFO_CREATE(info, n);
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, tmpdir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SERVER_NSPACE, nspace, PMIX_STRING);
    PMIX_INFO_LOAD(&info[2], PMIX_SERVER_RANK, &r, PMIX_PROC_RANK);
    // No system-wide rendezvous file: tools find a daemon's server
    // through its own directory only.
    PMIX_INFO_LOAD(&info[3], PMIX_SERVER_SYSTEM_SUPPORT, &no, PMIX_BOOL);
    // The node's topology, discovered once here, goes to the clients (a
    // file in tmpdir, hwloc.sm, which libpmix leaves behind: the daemon
    // removes the directory): without it every Open MPI process discovers
    // the node itself, PCI devices included, as none does under mpirun.
    PMIX_INFO_LOAD(&info[4], PMIX_SERVER_SHARE_TOPOLOGY, &yes, PMIX_BOOL);
    // libpmix's threads (its progress thread, its listener) are made in
    // PMIx_server_init and inherit this thread's signal mask: with SIGPIPE
    // blocked there, a send to a client that has gone fails with EPIPE.
    // Unblocked, the signal hits a thread Go did not make, where the Go
    // runtime gives it its default action and the whole daemon dies
    // ("signal: broken pipe").
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old);
    rc = PMIx_server_init(&module, info, n);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    PMIX_INFO_FREE(info, n);
    if (PMIX_SUCCESS == rc) {
        dyn_shift_init();
    }
    return rc;
}

static void op_done(pmix_status_t st, void *cbdata)
{
    dynGoOpDone((uintptr_t)cbdata, st);
}

pmix_status_t dyn_register_nspace(const char *nspace, int nlocal, pmix_info_t *info, size_t ninfo,
                                  uintptr_t h)
{
    return PMIx_server_register_nspace(nspace, nlocal, info, ninfo, op_done, (void *)h);
}

void dyn_deregister_nspace(const char *nspace, uintptr_t h)
{
    PMIx_server_deregister_nspace(nspace, op_done, (void *)h);
}

static void load_proc(pmix_proc_t *p, const char *nspace, uint32_t rank)
{
    PMIX_PROC_CONSTRUCT(p);
    PMIX_LOAD_PROCID(p, nspace, rank);
}

pmix_status_t dyn_register_client(const char *nspace, uint32_t rank, uint32_t uid, uint32_t gid,
                                  uintptr_t h)
{
    pmix_proc_t p;
    load_proc(&p, nspace, rank);
    return PMIx_server_register_client(&p, uid, gid, NULL, op_done, (void *)h);
}

void dyn_deregister_client(const char *nspace, uint32_t rank, uintptr_t h)
{
    pmix_proc_t p;
    load_proc(&p, nspace, rank);
    PMIx_server_deregister_client(&p, op_done, (void *)h);
}

static void dmodex_done(pmix_status_t st, char *data, size_t sz, void *cbdata)
{
    dynGoModexDone((uintptr_t)cbdata, st, data, sz);
}

pmix_status_t dyn_dmodex_request(const char *nspace, uint32_t rank, uintptr_t h)
{
    pmix_proc_t p;
    load_proc(&p, nspace, rank);
    return PMIx_server_dmodex_request(&p, dmodex_done, (void *)h);
}

void dyn_op_complete(pmix_op_cbfunc_t f, pmix_status_t st, void *cbdata)
{
    if (NULL != f) {
        f(st, cbdata);
    }
}

static void release_buf(void *p)
{
    free(p);
}

void dyn_modex_complete(pmix_modex_cbfunc_t f, pmix_status_t st, char *data, size_t n, void *cbdata)
{
    if (NULL == f) {
        free(data);
        return;
    }
    f(st, data, n, cbdata, release_buf, data);
}

const char *dyn_info_key(const pmix_info_t *info, size_t i)
{
    return info[i].key;
}

const char *dyn_info_string(const pmix_info_t *info, size_t i)
{
    return PMIX_STRING == info[i].value.type ? info[i].value.data.string : NULL;
}

const char *dyn_info_proc_nspace(const pmix_info_t *info, size_t i)
{
    if (PMIX_PROC != info[i].value.type || NULL == info[i].value.data.proc) {
        return NULL;
    }
    return info[i].value.data.proc->nspace;
}

char **dyn_query_keys(const pmix_query_t *q, size_t i)
{
    return q[i].keys;
}

pmix_info_t *dyn_query_quals(const pmix_query_t *q, size_t i, size_t *n)
{
    *n = q[i].nqual;
    return q[i].qualifiers;
}

static void release_darray(void *p)
{
    pmix_data_array_t *d = p;
    PMIX_DATA_ARRAY_FREE(d);
}

struct info_completion {
    pmix_info_cbfunc_t f;
    pmix_status_t st;
    pmix_data_array_t *d;
    void *cbdata;
};

static void info_complete_now(void *arg)
{
    struct info_completion *c = arg;

    dyn_count_completion();
    if (NULL == c->d) {
        c->f(c->st, NULL, 0, c->cbdata, NULL, NULL);
    } else {
        c->f(c->st, (pmix_info_t *)c->d->array, c->d->size, c->cbdata, release_darray, c->d);
    }
    free(c);
}

void dyn_info_complete(pmix_info_cbfunc_t f, pmix_status_t st, pmix_data_array_t *d, void *cbdata)
{
    struct info_completion *c;

    if (NULL == f || NULL == (c = malloc(sizeof *c))) {
        if (NULL != d) {
            release_darray(d);
        }
        if (NULL != f) {
            f(PMIX_ERR_NOMEM, NULL, 0, cbdata, NULL, NULL);
        }
        return;
    }
    *c = (struct info_completion){.f = f, .st = st, .d = d, .cbdata = cbdata};
    // On libpmix's thread: query_cbfunc is not safe from another (shift.c).
    dyn_shift(info_complete_now, c);
}

pmix_data_array_t *dyn_array(size_t n, pmix_data_type_t t)
{
    pmix_data_array_t *d;
    PMIX_DATA_ARRAY_CREATE(d, n, t);
    return d;
}

void dyn_array_free(pmix_data_array_t *d)
{
    PMIX_DATA_ARRAY_FREE(d);
}

void dyn_array_set_proc(pmix_data_array_t *d, size_t i, const char *nspace, uint32_t rank)
{
    pmix_proc_t *p = (pmix_proc_t *)d->array;
    PMIX_LOAD_PROCID(&p[i], nspace, rank);
}

void dyn_array_set_string(pmix_data_array_t *d, size_t i, const char *s)
{
    ((char **)d->array)[i] = strdup(s);
}

pmix_status_t dyn_info_add(void *list, const char *key, const void *value, pmix_data_type_t type)
{
    return PMIx_Info_list_add(list, key, value, type);
}


void dyn_argv_free(char **argv)
{
    if (NULL == argv) {
        return;
    }
    for (char **p = argv; NULL != *p; p++) {
        free(*p);
    }
    free(argv);
}
