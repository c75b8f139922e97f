/* spawn_client: PMIx_Spawn from a plain PMIx client, for lib/pmix's spawn
 * callback.
 *
 *   spawn_client N R    rank R spawns N copies of this program with the
 *                       arguments "child", its namespace and its rank, and
 *                       prints how many it spawned
 *   (as a child)        reads PMIX_SPAWNED and PMIX_PARENT_ID of its job and
 *                       prints whether the parent named there is the one
 *                       its arguments name
 *
 * Exits 0 when all went well. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pmix.h>

static int fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "FAIL %s: %s\n", what, PMIx_Error_string(rc));
    return 1;
}

static int child(const pmix_proc_t *me, const char *pns, const char *prank)
{
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    int spawned, parent_ok;

    PMIX_PROC_LOAD(&wild, me->nspace, PMIX_RANK_WILDCARD);
    if (PMIX_SUCCESS != (rc = PMIx_Get(&wild, PMIX_SPAWNED, NULL, 0, &v))) {
        return fail("PMIx_Get PMIX_SPAWNED", rc);
    }
    spawned = PMIX_BOOL == v->type && v->data.flag;
    PMIX_VALUE_RELEASE(v);
    if (PMIX_SUCCESS != (rc = PMIx_Get(&wild, PMIX_PARENT_ID, NULL, 0, &v))) {
        return fail("PMIx_Get PMIX_PARENT_ID", rc);
    }
    parent_ok = PMIX_PROC == v->type && 0 == strcmp(v->data.proc->nspace, pns) &&
                v->data.proc->rank == (pmix_rank_t)atoi(prank);
    PMIX_VALUE_RELEASE(v);
    printf("child %u: spawned %s, parent %s\n", me->rank, spawned ? "yes" : "no", parent_ok ? "right" : "wrong");
    return spawned && parent_ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_app_t app;
    pmix_nspace_t ns;
    pmix_status_t rc;
    char rank[16];
    int ret = 0;

    if (PMIX_SUCCESS != (rc = PMIx_Init(&me, NULL, 0))) {
        return fail("PMIx_Init", rc);
    }
    if (argc == 4 && 0 == strcmp(argv[1], "child")) {
        ret = child(&me, argv[2], argv[3]);
    } else if (argc == 3 && me.rank == (pmix_rank_t)atoi(argv[2])) {
        char *args[5] = {argv[0], "child", me.nspace, rank, NULL};
        snprintf(rank, sizeof(rank), "%u", me.rank);
        PMIX_APP_CONSTRUCT(&app);
        app.cmd = strdup(argv[0]);
        app.argv = args;
        app.maxprocs = atoi(argv[1]);
        rc = PMIx_Spawn(NULL, 0, &app, 1, ns);
        app.argv = NULL; /* ours, not to be freed */
        PMIX_APP_DESTRUCT(&app);
        if (PMIX_SUCCESS != rc) {
            ret = fail("PMIx_Spawn", rc);
        } else {
            printf("parent: spawned %s processes in a new namespace: %s\n", argv[1], strcmp(ns, me.nspace) ? "yes" : "no");
        }
    }
    fflush(stdout);
    if (PMIX_SUCCESS != (rc = PMIx_Finalize(NULL, 0))) {
        return fail("PMIx_Finalize", rc);
    }
    return ret;
}
