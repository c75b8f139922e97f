/* A PMIx client for lib/master's tests: reads the topology file its
 * server shares (PMIX_HWLOC_SHMEM_FILE, where Open MPI 4.1 looks first, so
 * that its processes adopt the server's topology instead of discovering
 * the node again) and prints "rank R topology PATH exists", "... missing"
 * or "rank R topology none". A fence keeps every rank alive until all
 * have looked. */
#include <stdio.h>
#include <sys/stat.h>
#include <pmix.h>

int main(void)
{
    pmix_proc_t me, all;
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    struct stat st;

    if (PMIX_SUCCESS != rc) {
        fprintf(stderr, "FAIL PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&all, PMIX_HWLOC_SHMEM_FILE, NULL, 0, &v);
    if (PMIX_SUCCESS == rc && PMIX_STRING == v->type) {
        printf("rank %u topology %s %s\n", me.rank, v->data.string,
               0 == stat(v->data.string, &st) ? "exists" : "missing");
    } else {
        printf("rank %u topology none\n", me.rank);
    }
    if (NULL != v) {
        PMIX_VALUE_RELEASE(v);
    }
    fflush(stdout);
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        fprintf(stderr, "FAIL PMIx_Fence: %s\n", PMIx_Error_string(rc));
    }
    PMIx_Finalize(NULL, 0);
    return PMIX_SUCCESS == rc ? 0 : 1;
}
