/* psets: a program that speaks PMIx directly (no MPI) and reports what its
 * launcher tells it about process sets, and the events it is sent: the
 * client side of dynrt's psets and resource changes through PMIx.
 *
 *   psets [WAIT_S]
 *
 * Every rank calls PMIx_Init and registers one handler for the process-set
 * events (PMIX_PROCESS_SET_DEFINE, PMIX_PROCESS_SET_DELETE) and one default
 * handler for any other event (a resource change, a job or process
 * termination): each event is printed with its status and its info keys.
 * Rank 0 queries PMIX_QUERY_NUM_PSETS, PMIX_QUERY_PSET_NAMES and, for every
 * name, PMIX_QUERY_PSET_MEMBERSHIP, and prints the answers (or the status
 * of a refused query). Every rank prints the sets it belongs to
 * (PMIx_Get PMIX_PSET_NAMES). Then all wait WAIT_S seconds (default 0) for
 * events, fence, and finalize. Members of the caller's own namespace are
 * printed as job:RANK, others as other:RANK, so that the output does not
 * depend on the launcher's namespace names.
 *
 * Output lines (rank 0's query lines first; order across ranks is not
 * fixed):
 *   psets rank=R size=S
 *   num_psets=N | num_psets: STATUS
 *   pset_names=A,B | pset_names: STATUS
 *   pset A members=job:0,job:1 | pset A members: STATUS
 *   rank R in psets: A,B | rank R in psets: STATUS
 *   rank R event STATUS_STRING (CODE): KEY=VALUE ...
 *   rank R done
 * Exit 1 if PMIx_Init fails (no PMIx server: not started by a PMIx
 * launcher), else 0. Build: cc psets.c $(pkg-config --cflags --libs pmix). */
#define _DEFAULT_SOURCE /* strncasecmp in pmix_common.h */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pmixprint.h"

static void event(size_t id, pmix_status_t status, const pmix_proc_t *source,
                  pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                  pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    char line[4096], v[1024];
    size_t i, used;

    (void)id;
    (void)source;
    (void)results;
    (void)nresults;
    if (status == PMIX_ERR_LOST_CONNECTION) {
        /* libpmix tells the others when a peer of the job closes its
         * connection at its end: its timing, not the launcher's, decides
         * whether it comes before this process's own end. */
        if (cbfunc != NULL)
            cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
        return;
    }
    used = snprintf(line, sizeof line, "rank %u event %s (%d):", me.rank, PMIx_Error_string(status), status);
    for (i = 0; i < ninfo && used + 1 < sizeof line; i++) {
        value(v, sizeof v, &info[i].value);
        used += snprintf(line + used, sizeof line - used, " %s=%s", info[i].key, v);
    }
    printf("%s\n", line);
    fflush(stdout);
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* query asks one key (with an optional qualifier) and prints the answer
 * under label. */
static void query(const char *label, const char *key, const char *qkey, const char *qval)
{
    pmix_query_t q;
    pmix_info_t *res = NULL;
    size_t nres = 0;
    pmix_status_t rc;
    char v[2048];

    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, key);
    if (qkey != NULL) {
        PMIX_INFO_CREATE(q.qualifiers, 1);
        q.nqual = 1;
        PMIX_INFO_LOAD(&q.qualifiers[0], qkey, qval, PMIX_STRING);
    }
    rc = PMIx_Query_info(&q, 1, &res, &nres);
    if (rc != PMIX_SUCCESS || nres == 0)
        printf("%s: %s\n", label, PMIx_Error_string(rc == PMIX_SUCCESS ? PMIX_ERR_NOT_FOUND : rc));
    else {
        value(v, sizeof v, &res[0].value);
        printf("%s=%s\n", label, v);
    }
    if (res != NULL)
        PMIX_INFO_FREE(res, nres);
    PMIX_QUERY_DESTRUCT(&q);
}

int main(int argc, char **argv)
{
    pmix_status_t rc, psetcodes[] = {PMIX_PROCESS_SET_DEFINE, PMIX_PROCESS_SET_DELETE};
    pmix_value_t *val = NULL;
    pmix_proc_t wild;
    uint32_t size = 0;
    char v[2048], names[2048] = "", *tok, *save;
    int wait_s = argc > 1 ? atoi(argv[1]) : 0;
    pmix_query_t q;
    pmix_info_t *res = NULL;
    size_t nres = 0;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "psets: PMIx_Init: %s (not started by a PMIx launcher?)\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val) == PMIX_SUCCESS && val != NULL) {
        PMIX_VALUE_GET_NUMBER(rc, val, size, uint32_t);
        PMIX_VALUE_RELEASE(val);
    }
    printf("psets rank=%u size=%u\n", me.rank, size);
    rc = PMIx_Register_event_handler(psetcodes, 2, NULL, 0, event, NULL, NULL);
    if (rc < 0)
        printf("rank %u pset event handler: %s\n", me.rank, PMIx_Error_string(rc));
    rc = PMIx_Register_event_handler(NULL, 0, NULL, 0, event, NULL, NULL);
    if (rc < 0)
        printf("rank %u default event handler: %s\n", me.rank, PMIx_Error_string(rc));
    if (me.rank == 0) {
        query("num_psets", PMIX_QUERY_NUM_PSETS, NULL, NULL);
        /* The names once more, kept for the membership queries. */
        PMIX_QUERY_CONSTRUCT(&q);
        PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PSET_NAMES);
        rc = PMIx_Query_info(&q, 1, &res, &nres);
        if (rc == PMIX_SUCCESS && nres > 0) {
            value(names, sizeof names, &res[0].value);
            printf("pset_names=%s\n", names);
        } else
            printf("pset_names: %s\n", PMIx_Error_string(rc == PMIX_SUCCESS ? PMIX_ERR_NOT_FOUND : rc));
        if (res != NULL)
            PMIX_INFO_FREE(res, nres);
        PMIX_QUERY_DESTRUCT(&q);
        for (tok = strtok_r(names, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
            char label[600];
            snprintf(label, sizeof label, "pset %s members", tok);
            query(label, PMIX_QUERY_PSET_MEMBERSHIP, PMIX_PSET_NAME, tok);
        }
    }
    if (PMIx_Get(&me, PMIX_PSET_NAMES, NULL, 0, &val) == PMIX_SUCCESS && val != NULL) {
        value(v, sizeof v, val);
        printf("rank %u in psets: %s\n", me.rank, v);
        PMIX_VALUE_RELEASE(val);
    } else
        printf("rank %u in psets: %s\n", me.rank, PMIx_Error_string(PMIX_ERR_NOT_FOUND));
    fflush(stdout);
    if (wait_s > 0) {
        struct timespec ts = {wait_s, 0};
        nanosleep(&ts, NULL);
    }
    PMIx_Fence(NULL, 0, NULL, 0);
    printf("rank %u done\n", me.rank);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
