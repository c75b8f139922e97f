/* A PMIx client for lib/pmix's tests: PMIx_Init, Put of a value naming
 * the rank, Commit, Fence with data collection, Get of every rank's value
 * and of the job's keys, Finalize. A number as argument checks the values
 * of the first that many ranks only (the others may have no process).
 * With the argument "abort" it calls PMIx_Abort(7, ...) after the init
 * instead; with "nofinalize", rank 1 exits 0 without PMIx_Finalize. With
 * "pubsub" (2 ranks or more): rank 0 publishes svc=port-0, rank 1 looks it
 * up, rank 0 unpublishes it, rank 1 finds it gone (fences in between).
 * With "dmodex", the fence collects no data: the values of the ranks of
 * other nodes come by direct modex, one Get at a time (and a last fence
 * keeps every rank alive until all have read: the data of a process is
 * served while it lives, as under MPI_Finalize's fence). With "hold", it
 * prints "connected" after the init and exits 0 (without finalizing) once
 * its standard input ends; with "gated", it waits for a line on its
 * standard input before the init. Prints one line per check; exits 0 when
 * all passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pmix.h>

static int fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "FAIL %s: %s\n", what, PMIx_Error_string(rc));
    return 1;
}

static int get_u32(const pmix_proc_t *p, const char *key, uint32_t *out)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(p, key, NULL, 0, &v);
    if (PMIX_SUCCESS != rc) {
        return fail(key, rc);
    }
    if (PMIX_UINT32 != v->type) {
        fprintf(stderr, "FAIL %s: type %s\n", key, PMIx_Data_type_string(v->type));
        PMIX_VALUE_RELEASE(v);
        return 1;
    }
    *out = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    return 0;
}

static int barrier(void)
{
    pmix_status_t rc = PMIx_Fence(NULL, 0, NULL, 0);
    return PMIX_SUCCESS == rc ? 0 : fail("PMIx_Fence", rc);
}

static int pubsub(const pmix_proc_t *me)
{
    pmix_info_t info[2];
    pmix_pdata_t pd;
    pmix_status_t rc;
    pmix_data_range_t range = PMIX_RANGE_SESSION;
    char *keys[] = {"svc", NULL};

    if (0 == me->rank) {
        /* a directive along with the data: not published */
        PMIX_INFO_LOAD(&info[0], "svc", "port-0", PMIX_STRING);
        PMIX_INFO_LOAD(&info[1], PMIX_RANGE, &range, PMIX_DATA_RANGE);
        if (PMIX_SUCCESS != (rc = PMIx_Publish(info, 2))) {
            return fail("PMIx_Publish", rc);
        }
        PMIX_INFO_DESTRUCT(&info[0]);
        PMIX_INFO_DESTRUCT(&info[1]);
        printf("rank 0 published svc\n");
    }
    if (barrier()) {
        return 1;
    }
    if (1 == me->rank) {
        PMIX_PDATA_CONSTRUCT(&pd);
        PMIX_LOAD_KEY(pd.key, "svc");
        if (PMIX_SUCCESS != (rc = PMIx_Lookup(&pd, 1, NULL, 0))) {
            return fail("PMIx_Lookup", rc);
        }
        if (PMIX_STRING != pd.value.type) {
            fprintf(stderr, "FAIL svc's type\n");
            return 1;
        }
        printf("rank 1 found svc=%s\n", pd.value.data.string);
        PMIX_PDATA_DESTRUCT(&pd);
    }
    if (barrier()) {
        return 1;
    }
    if (0 == me->rank && PMIX_SUCCESS != (rc = PMIx_Unpublish(keys, NULL, 0))) {
        return fail("PMIx_Unpublish", rc);
    }
    if (barrier()) {
        return 1;
    }
    if (1 == me->rank) {
        PMIX_PDATA_CONSTRUCT(&pd);
        PMIX_LOAD_KEY(pd.key, "svc");
        rc = PMIx_Lookup(&pd, 1, NULL, 0);
        printf("rank 1 after unpublish: %s\n", PMIx_Error_string(rc));
        PMIX_PDATA_DESTRUCT(&pd);
    }
    fflush(stdout);
    rc = PMIx_Finalize(NULL, 0);
    return PMIX_SUCCESS == rc ? 0 : fail("PMIx_Finalize", rc);
}

int main(int argc, char **argv)
{
    pmix_proc_t me, wild, peer;
    pmix_status_t rc;
    pmix_value_t val, *v;
    pmix_info_t collect;
    uint32_t size, lsize, check;
    char buf[64];
    bool gather = true;

    if (argc > 1 && 0 == strcmp(argv[1], "gated") && NULL == fgets(buf, sizeof buf, stdin)) {
        return fail("gated: no go on stdin", PMIX_ERROR);
    }
    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        return fail("PMIx_Init", rc);
    }
    if (argc > 1 && 0 == strcmp(argv[1], "hold")) {
        printf("connected\n");
        fflush(stdout);
        while (EOF != getchar()) {
        }
        return 0;
    }
    if (argc > 1 && 0 == strcmp(argv[1], "abort")) {
        PMIx_Abort(7, "test abort", NULL, 0);
        return 3; /* not reached when the server kills us */
    }
    if (argc > 1 && 0 == strcmp(argv[1], "pubsub")) {
        return pubsub(&me);
    }
    PMIX_PROC_LOAD(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (get_u32(&wild, PMIX_JOB_SIZE, &size) || get_u32(&wild, PMIX_LOCAL_SIZE, &lsize)) {
        return 1;
    }
    check = size;
    if (argc > 1 && 0 != strcmp(argv[1], "nofinalize") && 0 != strcmp(argv[1], "dmodex") &&
        0 != strcmp(argv[1], "gated")) {
        check = (uint32_t)atoi(argv[1]);
    }
    if (argc > 1 && 0 == strcmp(argv[1], "dmodex")) {
        gather = false;
    }
    snprintf(buf, sizeof(buf), "hello from %u", me.rank);
    PMIX_VALUE_LOAD(&val, buf, PMIX_STRING);
    if (PMIX_SUCCESS != (rc = PMIx_Put(PMIX_GLOBAL, "dyn.test", &val))) {
        return fail("PMIx_Put", rc);
    }
    PMIX_VALUE_DESTRUCT(&val);
    if (PMIX_SUCCESS != (rc = PMIx_Commit())) {
        return fail("PMIx_Commit", rc);
    }
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &gather, PMIX_BOOL);
    if (PMIX_SUCCESS != (rc = PMIx_Fence(&wild, 1, &collect, 1))) {
        return fail("PMIx_Fence", rc);
    }
    PMIX_INFO_DESTRUCT(&collect);
    for (uint32_t r = 0; r < check; r++) {
        char want[64];
        PMIX_PROC_LOAD(&peer, me.nspace, r);
        if (PMIX_SUCCESS != (rc = PMIx_Get(&peer, "dyn.test", NULL, 0, &v))) {
            return fail("PMIx_Get dyn.test", rc);
        }
        snprintf(want, sizeof(want), "hello from %u", r);
        if (PMIX_STRING != v->type || 0 != strcmp(v->data.string, want)) {
            fprintf(stderr, "FAIL rank %u's value\n", r);
            return 1;
        }
        PMIX_VALUE_RELEASE(v);
    }
    if (!gather && barrier()) {
        return 1;
    }
    printf("rank %u of %u (%u local): got %u values\n", me.rank, size, lsize, check);
    fflush(stdout);
    if (argc > 1 && 0 == strcmp(argv[1], "nofinalize") && 1 == me.rank) {
        return 0;
    }
    if (PMIX_SUCCESS != (rc = PMIx_Finalize(NULL, 0))) {
        return fail("PMIx_Finalize", rc);
    }
    return 0;
}
