//go:build pmix

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "glue.h"
#include "dyn.h"
#include "shift.h"
#include "_cgo_export.h"

pmix_status_t dyn_spawn_fn(const pmix_proc_t *proc, const pmix_info_t job_info[], size_t ninfo,
                           const pmix_app_t apps[], size_t napps, pmix_spawn_cbfunc_t cbfunc,
                           void *cbdata)
{
    return dynGoSpawn((char *)proc->nspace, proc->rank, (pmix_info_t *)job_info, ninfo,
                      (pmix_app_t *)apps, napps, cbfunc, cbdata);
}

pmix_status_t dyn_connect_fn(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                             size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)info;
    (void)ninfo;
    return dynGoConnect((pmix_proc_t *)procs, nprocs, 1, cbfunc, cbdata);
}

pmix_status_t dyn_disconnect_fn(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)info;
    (void)ninfo;
    return dynGoConnect((pmix_proc_t *)procs, nprocs, 0, cbfunc, cbdata);
}

void dyn_spawn_complete(pmix_spawn_cbfunc_t f, pmix_status_t st, const char *nspace, void *cbdata)
{
    pmix_nspace_t ns;

    if (NULL == f) {
        return;
    }
    PMIX_LOAD_NSPACE(ns, nspace);
    f(st, ns, cbdata);
}

char *dyn_info_text(const pmix_info_t *info, size_t i)
{
    const pmix_value_t *v = &info[i].value;
    char buf[32];

    switch (v->type) {
    case PMIX_STRING:
        return NULL == v->data.string ? NULL : strdup(v->data.string);
    case PMIX_BOOL:
        return strdup(v->data.flag ? "true" : "false");
    case PMIX_INT:
        snprintf(buf, sizeof(buf), "%d", v->data.integer);
        break;
    case PMIX_INT32:
        snprintf(buf, sizeof(buf), "%" PRId32, v->data.int32);
        break;
    case PMIX_UINT32:
        snprintf(buf, sizeof(buf), "%" PRIu32, v->data.uint32);
        break;
    case PMIX_UINT16:
        snprintf(buf, sizeof(buf), "%" PRIu16, v->data.uint16);
        break;
    case PMIX_SIZE:
        snprintf(buf, sizeof(buf), "%zu", v->data.size);
        break;
    default:
        return NULL;
    }
    return strdup(buf);
}

pmix_status_t dyn_value_pack(const pmix_info_t *info, size_t i, char **out, size_t *n)
{
    pmix_data_buffer_t buf;
    pmix_status_t rc;

    *out = NULL;
    *n = 0;
    PMIX_DATA_BUFFER_CONSTRUCT(&buf);
    rc = PMIx_Data_pack(NULL, &buf, (void *)&info[i].value, 1, PMIX_VALUE);
    if (PMIX_SUCCESS == rc) {
        PMIX_DATA_BUFFER_UNLOAD(&buf, *out, *n);
        if (NULL == *out) {
            rc = PMIX_ERR_NOMEM;
        }
    }
    PMIX_DATA_BUFFER_DESTRUCT(&buf);
    return rc;
}

// Loads pd with a value that dyn_value_pack packed (data, n: copied).
static pmix_status_t load_packed(pmix_pdata_t *pd, const char *data, size_t n)
{
    pmix_data_buffer_t buf;
    pmix_value_t val;
    int32_t cnt = 1;
    char *copy = malloc(n);
    pmix_status_t rc;

    if (NULL == copy) {
        return PMIX_ERR_NOMEM;
    }
    memcpy(copy, data, n);
    PMIX_DATA_BUFFER_CONSTRUCT(&buf);
    PMIX_DATA_BUFFER_LOAD(&buf, copy, n); // buf owns copy now
    PMIX_VALUE_CONSTRUCT(&val);
    rc = PMIx_Data_unpack(NULL, &buf, &val, &cnt, PMIX_VALUE);
    if (PMIX_SUCCESS == rc) {
        rc = PMIx_Value_xfer(&pd->value, &val);
    }
    PMIX_VALUE_DESTRUCT(&val);
    PMIX_DATA_BUFFER_DESTRUCT(&buf);
    return rc;
}

struct lookup_completion {
    pmix_lookup_cbfunc_t f;
    pmix_status_t st;
    pmix_pdata_t *pd;
    size_t n;
    void *cbdata;
};

static void lookup_complete_now(void *arg)
{
    struct lookup_completion *c = arg;

    dyn_count_completion();
    // libpmix packs the answer before f returns.
    c->f(c->st, PMIX_SUCCESS == c->st ? c->pd : NULL, PMIX_SUCCESS == c->st ? c->n : 0, c->cbdata);
    if (NULL != c->pd) {
        PMIX_PDATA_FREE(c->pd, c->n);
    }
    free(c);
}

void dyn_lookup_complete_values(pmix_lookup_cbfunc_t f, pmix_status_t st, const char *nspace,
                                uint32_t rank, char **keys, char **vals, size_t *lens, int *packed,
                                size_t n, void *cbdata)
{
    struct lookup_completion *c;
    pmix_pdata_t *pd = NULL;

    if (NULL == f) {
        return;
    }
    // The answer is copied here (Go frees its arrays on return), and
    // handed to libpmix on its own thread: lookup_cbfunc is not safe from
    // another (shift.c).
    if (0 < n) {
        PMIX_PDATA_CREATE(pd, n);
        for (size_t i = 0; i < n && PMIX_SUCCESS == st; i++) {
            PMIX_LOAD_PROCID(&pd[i].proc, nspace, rank);
            PMIX_LOAD_KEY(pd[i].key, keys[i]);
            if (packed[i]) {
                st = load_packed(&pd[i], vals[i], lens[i]);
            } else {
                st = PMIx_Value_load(&pd[i].value, vals[i], PMIX_STRING);
            }
        }
    }
    if (NULL == (c = malloc(sizeof *c))) {
        if (NULL != pd) {
            PMIX_PDATA_FREE(pd, n);
        }
        f(PMIX_ERR_NOMEM, NULL, 0, cbdata);
        return;
    }
    *c = (struct lookup_completion){.f = f, .st = st, .pd = pd, .n = n, .cbdata = cbdata};
    dyn_shift(lookup_complete_now, c);
}
