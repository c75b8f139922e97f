/* rc_follow: a plain PMIx client that follows dynrt's resource changes
 * (docs/mpi.md, "Resource changes through PMIx"; codes in dynrt_pmix.h).
 *
 *   rc_follow [CHANGES [WAIT_S [fence] [noaccept] [together] [spawn=PROG] [fenceset]]]
 *
 * Every rank opts in (DYNRT_PMIX_MALLEABLE), registers one handler for
 * PMIX_PROCESS_SET_DEFINE, DYNRT_PMIX_RC and DYNRT_PMIX_ACCEPTED, and
 * follows CHANGES changes (default 1) to their end (FINALIZED or ABORTED)
 * within WAIT_S seconds (default 60). When a change is announced, each
 * rank asks PMIx_Query for the delta set's members, and the root (lowest
 * member) of each bound set that holds it accepts the change. A rank that
 * a FINALIZED SUB removes, or a FINALIZED REPLACE replaces, finalizes and
 * exits 0; the others go on.
 *
 * A process that an ADD or a REPLACE started finds the change in its namespace's job
 * info (DYNRT_PMIX_RC_DELTA), confirms it (DYNRT_PMIX_CONFIRM) and counts
 * it, with the changes numbered before it, as followed once the
 * confirmation comes back. With "fence",
 * every rank that stays fences its own namespace (PMIx_Fence) once its
 * changes ended: twice in the job's first namespace, once in an ADD's.
 * With "noaccept" no rank accepts (a change then waits for the runtime to
 * abort it). With "together", once its changes ended, every rank connects
 * the job's first namespace and the last ADD's (PMIx_Connect), fences
 * with them, reads what PMIx rank 0 of the other namespace put (its dynrt
 * rank) and disconnects, before the "fence" fences. With "spawn=PROG",
 * PMIx rank 0 of an ADD's namespace then spawns one PROG (spawn_client)
 * with the arguments "child", its namespace and PMIx rank, which checks
 * that its PMIX_PARENT_ID names them. With "fenceset", every rank that
 * stays fences over the members of the last change's (first) bound set as
 * PMIx_Query gives them (the processes that go on, whatever namespace). R in the lines is the dynrt rank (DYNRT_PMIX_BASE plus
 * the PMIx rank).
 *
 * Lines (order across ranks is not fixed; sets by name, PMIx ranks of the
 * own namespace as job:R, of an ADD's namespace NS.rcN as job.rcN:R, of
 * others as other:R):
 *   rank R malleable
 *   rank R joins DELTA as NSPACE:R' of JOB
 *   rank R confirmed DELTA: STATUS | rank R confirmed DELTA: error WHY
 *   rank R pset_define NAME members=job:2,job:3
 *   rank R rc TYPE STATUS DELTA ranks=job:2,job:3 [out=job:1] bound=SET[,SET] [error=WHY]
 *   rank R delta DELTA members=job:2,job:3 | rank R delta DELTA members: STATUS
 *   rank R accepts DELTA for SET
 *   rank R accepted DELTA: STATUS | rank R accepted DELTA: error WHY
 *   rank R leaves
 *   rank R together: the other namespace's rank 0 is rank R0
 *     | rank R connect: WHY | rank R fence with the other namespace: WHY
 *     | rank R together: get: WHY | rank R disconnect: WHY
 *   rank R spawned NSPACE | rank R spawn: WHY
 *   rank R fenced N | rank R fence N: WHY
 *   rank R fenced SET (K procs) | rank R fence SET: WHY
 *   rank R done
 * Exit 0; 1 if PMIx_Init fails, 2 if the changes do not end in time.
 * Build: cc -I libdynrt/include rc_follow.c $(pkg-config --cflags --libs pmix). */
#define _DEFAULT_SOURCE
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "dynrt_pmix.h"
#include "pmixprint.h"

/* A change's status as the handler saw it, for the main loop to act on
 * (PMIx calls that wait must not run inside a handler). */
struct change {
    char type[16], status[16], delta[256], bound[512], ranks[1024], out[1024];
    int removed; /* this rank leaves: in a SUB's delta, or a REPLACE's replaced processes */
};

#define QLEN 64
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct change queue[QLEN];
static int qhead, qtail;
static unsigned myrank;   /* dynrt rank */
static int noaccept;      /* never accept */
static char addns[PMIX_MAX_NSLEN + 1]; /* the namespace of the last ADD's processes, as announced */
static char joined[256]; /* the ADD that started this process, if one did */

static void push(const struct change *c)
{
    pthread_mutex_lock(&mu);
    if ((qtail + 1) % QLEN != qhead) {
        queue[qtail] = *c;
        qtail = (qtail + 1) % QLEN;
    }
    pthread_mutex_unlock(&mu);
}

static const char *info_string(const pmix_info_t info[], size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (PMIX_CHECK_KEY(&info[i], key) && info[i].value.type == PMIX_STRING)
            return info[i].value.data.string;
    return NULL;
}

static const pmix_value_t *info_value(const pmix_info_t info[], size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (PMIX_CHECK_KEY(&info[i], key))
            return &info[i].value;
    return NULL;
}

static int contains(const pmix_value_t *procs, const pmix_proc_t *p)
{
    if (procs == NULL || procs->type != PMIX_DATA_ARRAY || procs->data.darray == NULL ||
        procs->data.darray->type != PMIX_PROC)
        return 0;
    for (size_t i = 0; i < procs->data.darray->size; i++)
        if (PMIX_CHECK_PROCID(&((pmix_proc_t *)procs->data.darray->array)[i], p))
            return 1;
    return 0;
}

static void copy(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src != NULL ? src : "");
}

static void event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                  size_t ninfo, pmix_info_t results[], size_t nresults,
                  pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    char v[2048];
    const pmix_value_t *val;
    const char *err = info_string(info, ninfo, DYNRT_PMIX_RC_ERROR);
    struct change c;

    (void)id;
    (void)source;
    (void)results;
    (void)nresults;
    switch (status) {
    case PMIX_PROCESS_SET_DEFINE:
        val = info_value(info, ninfo, PMIX_PSET_MEMBERS);
        v[0] = '\0';
        if (val != NULL)
            value(v, sizeof v, val);
        printf("rank %u pset_define %s members=%s\n", myrank, info_string(info, ninfo, PMIX_PSET_NAME), v);
        break;
    case DYNRT_PMIX_RC:
        memset(&c, 0, sizeof c);
        copy(c.type, sizeof c.type, info_string(info, ninfo, DYNRT_PMIX_RC_TYPE));
        copy(c.status, sizeof c.status, info_string(info, ninfo, DYNRT_PMIX_RC_STATUS));
        copy(c.delta, sizeof c.delta, info_string(info, ninfo, DYNRT_PMIX_RC_DELTA));
        copy(c.bound, sizeof c.bound, info_string(info, ninfo, DYNRT_PMIX_RC_BOUND));
        val = info_value(info, ninfo, PMIX_EVENT_AFFECTED_PROCS);
        if (val != NULL)
            value(c.ranks, sizeof c.ranks, val);
        c.removed = strcmp(c.type, "SUB") == 0 && contains(val, &me);
        if (strcmp(c.type, "ADD") == 0 && val != NULL && val->type == PMIX_DATA_ARRAY && val->data.darray->size > 0 &&
            val->data.darray->type == PMIX_PROC) {
            pthread_mutex_lock(&mu);
            PMIX_LOAD_NSPACE(addns, ((pmix_proc_t *)val->data.darray->array)[0].nspace);
            pthread_mutex_unlock(&mu);
        }
        val = info_value(info, ninfo, DYNRT_PMIX_RC_OUT);
        if (val != NULL) {
            value(c.out, sizeof c.out, val);
            c.removed = strcmp(c.type, "REPLACE") == 0 && contains(val, &me);
        }
        printf("rank %u rc %s %s %s ranks=%s%s%s bound=%s%s%s\n", myrank, c.type, c.status, c.delta, c.ranks,
               val != NULL ? " out=" : "", c.out, c.bound, err ? " error=" : "", err ? err : "");
        push(&c);
        break;
    case DYNRT_PMIX_ACCEPTED: {
        const char *delta = info_string(info, ninfo, DYNRT_PMIX_RC_DELTA);
        const char *what = joined[0] != '\0' && delta != NULL && strcmp(delta, joined) == 0 ? "confirmed" : "accepted";
        if (err != NULL)
            printf("rank %u %s %s: error %s\n", myrank, what, delta, err);
        else
            printf("rank %u %s %s: %s\n", myrank, what, delta, info_string(info, ninfo, DYNRT_PMIX_RC_STATUS));
        if (what[0] == 'c') { /* the end of the change that started this process */
            memset(&c, 0, sizeof c);
            copy(c.type, sizeof c.type, "ADD");
            copy(c.status, sizeof c.status, err != NULL ? "ABORTED" : info_string(info, ninfo, DYNRT_PMIX_RC_STATUS));
            copy(c.delta, sizeof c.delta, delta);
            copy(c.bound, sizeof c.bound, info_string(info, ninfo, DYNRT_PMIX_RC_BOUND));
            push(&c);
        }
        break;
    }
    }
    fflush(stdout);
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* query_members asks PMIx_Query for the members of set in the caller's
 * job; the caller frees *res. */
static pmix_status_t query_members(const char *set, pmix_info_t **res, size_t *nres)
{
    pmix_query_t q;
    pmix_status_t rc;

    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PSET_MEMBERSHIP);
    PMIX_INFO_CREATE(q.qualifiers, 2);
    q.nqual = 2;
    PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_PSET_NAME, set, PMIX_STRING);
    PMIX_INFO_LOAD(&q.qualifiers[1], PMIX_NSPACE, me.nspace, PMIX_STRING);
    rc = PMIx_Query_info(&q, 1, res, nres);
    PMIX_QUERY_DESTRUCT(&q);
    return rc;
}

/* members asks PMIx_Query for the members of set; returns the status and
 * fills text (job:R,...) and whether this process is the set's root (its
 * first member: the lowest dynrt rank). */
static pmix_status_t members(const char *set, char *text, size_t n, int *root)
{
    pmix_info_t *res = NULL;
    size_t nres = 0;
    pmix_status_t rc = query_members(set, &res, &nres);

    *root = 0;
    if (rc == PMIX_SUCCESS && nres == 0)
        rc = PMIX_ERR_NOT_FOUND;
    if (rc == PMIX_SUCCESS) {
        value(text, n, &res[0].value);
        if (res[0].value.type == PMIX_DATA_ARRAY && res[0].value.data.darray->type == PMIX_PROC &&
            res[0].value.data.darray->size > 0)
            *root = PMIX_CHECK_PROCID(&((pmix_proc_t *)res[0].value.data.darray->array)[0], &me);
    }
    if (res != NULL)
        PMIX_INFO_FREE(res, nres);
    return rc;
}

/* announced: query the delta, and accept for every bound set this rank
 * is the root of. */
static void announced(const struct change *c)
{
    char text[2048], bound[512], *tok, *save;
    int root;
    pmix_status_t rc;
    pmix_info_t info[3];

    rc = members(c->delta, text, sizeof text, &root);
    if (rc == PMIX_SUCCESS)
        printf("rank %u delta %s members=%s\n", myrank, c->delta, text);
    else
        printf("rank %u delta %s members: %s\n", myrank, c->delta, PMIx_Error_string(rc));
    copy(bound, sizeof bound, c->bound);
    for (tok = strtok_r(bound, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (noaccept || members(tok, text, sizeof text, &root) != PMIX_SUCCESS || !root)
            continue;
        printf("rank %u accepts %s for %s\n", myrank, c->delta, tok);
        fflush(stdout);
        PMIX_INFO_LOAD(&info[0], DYNRT_PMIX_RC_DELTA, c->delta, PMIX_STRING);
        PMIX_INFO_LOAD(&info[1], DYNRT_PMIX_RC_BOUND, tok, PMIX_STRING);
        PMIX_INFO_LOAD(&info[2], PMIX_EVENT_DO_NOT_CACHE, NULL, PMIX_BOOL);
        rc = PMIx_Notify_event(DYNRT_PMIX_ACCEPT, &me, PMIX_RANGE_RM, info, 3, NULL, NULL);
        if (rc != PMIX_SUCCESS)
            printf("rank %u accept: %s\n", myrank, PMIx_Error_string(rc));
        for (int i = 0; i < 3; i++)
            PMIX_INFO_DESTRUCT(&info[i]);
    }
    fflush(stdout);
}

/* whoami reads this namespace's dynrt job info: the dynrt rank of PMIx
 * rank 0, and the change that started it, if one did. */
static void whoami(char *job, size_t n)
{
    pmix_proc_t wild;
    pmix_value_t *v = NULL;

    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    myrank = me.rank;
    if (PMIx_Get(&wild, DYNRT_PMIX_BASE, NULL, 0, &v) == PMIX_SUCCESS && v->type == PMIX_UINT32)
        myrank = v->data.uint32 + me.rank;
    if (v != NULL)
        PMIX_VALUE_RELEASE(v);
    v = NULL;
    job[0] = '\0';
    if (PMIx_Get(&wild, DYNRT_PMIX_JOB, NULL, 0, &v) == PMIX_SUCCESS && v->type == PMIX_STRING)
        copy(job, n, v->data.string);
    if (v != NULL)
        PMIX_VALUE_RELEASE(v);
    v = NULL;
    if (PMIx_Get(&wild, DYNRT_PMIX_RC_DELTA, NULL, 0, &v) == PMIX_SUCCESS && v->type == PMIX_STRING)
        copy(joined, sizeof joined, v->data.string);
    if (v != NULL)
        PMIX_VALUE_RELEASE(v);
}

/* together connects the job's first namespace and the last ADD's
 * (PMIx_Connect), fences them together, and reads what PMIx rank 0 of the
 * other namespace put: its dynrt rank. */
static void together(const char *job)
{
    pmix_proc_t procs[2], peer;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    const char *other;

    pthread_mutex_lock(&mu);
    PMIX_LOAD_PROCID(&procs[0], job, PMIX_RANK_WILDCARD);
    PMIX_LOAD_PROCID(&procs[1], joined[0] != '\0' ? me.nspace : addns, PMIX_RANK_WILDCARD);
    pthread_mutex_unlock(&mu);
    other = joined[0] != '\0' ? procs[0].nspace : procs[1].nspace;
    if ((rc = PMIx_Connect(procs, 2, NULL, 0)) != PMIX_SUCCESS) {
        printf("rank %u connect: %s\n", myrank, PMIx_Error_string(rc));
        return;
    }
    if ((rc = PMIx_Fence(procs, 2, NULL, 0)) != PMIX_SUCCESS) {
        printf("rank %u fence with the other namespace: %s\n", myrank, PMIx_Error_string(rc));
        return;
    }
    PMIX_LOAD_PROCID(&peer, other, 0);
    rc = PMIx_Get(&peer, "rc_follow.rank", NULL, 0, &v);
    if (rc == PMIX_SUCCESS && v->type == PMIX_UINT32)
        printf("rank %u together: the other namespace's rank 0 is rank %u\n", myrank, v->data.uint32);
    else
        printf("rank %u together: get: %s\n", myrank, PMIx_Error_string(rc));
    if (v != NULL)
        PMIX_VALUE_RELEASE(v);
    if ((rc = PMIx_Disconnect(procs, 2, NULL, 0)) != PMIX_SUCCESS)
        printf("rank %u disconnect: %s\n", myrank, PMIx_Error_string(rc));
}

/* fenceset fences over the members of set (PMIx_Query); members of
 * several namespaces connect first (PMIx_Connect), as PMIx wants
 * processes of different namespaces to. */
static void fenceset(const char *set)
{
    pmix_info_t *res = NULL;
    size_t nres = 0;
    pmix_status_t rc = query_members(set, &res, &nres);

    if (rc == PMIX_SUCCESS && (nres == 0 || res[0].value.type != PMIX_DATA_ARRAY ||
                               res[0].value.data.darray->type != PMIX_PROC))
        rc = PMIX_ERR_NOT_FOUND;
    if (rc == PMIX_SUCCESS) {
        pmix_data_array_t *da = res[0].value.data.darray;
        pmix_proc_t *ps = da->array;
        int mixed = 0;
        for (size_t i = 1; i < da->size; i++)
            mixed |= !PMIX_CHECK_NSPACE(ps[i].nspace, ps[0].nspace);
        if (mixed)
            rc = PMIx_Connect(ps, da->size, NULL, 0);
        if (rc == PMIX_SUCCESS)
            rc = PMIx_Fence(ps, da->size, NULL, 0);
        if (rc == PMIX_SUCCESS)
            printf("rank %u fenced %s (%zu procs)\n", myrank, set, da->size);
    }
    if (rc != PMIX_SUCCESS)
        printf("rank %u fence %s: %s\n", myrank, set, PMIx_Error_string(rc));
    fflush(stdout);
    if (res != NULL)
        PMIX_INFO_FREE(res, nres);
}

/* spawn starts one prog as a child of this process (PMIx_Spawn). */
static void spawn(const char *prog)
{
    pmix_app_t app;
    pmix_nspace_t ns;
    pmix_status_t rc;
    char rank[16], *args[5];

    snprintf(rank, sizeof rank, "%u", me.rank);
    args[0] = (char *)prog;
    args[1] = "child";
    args[2] = me.nspace;
    args[3] = rank;
    args[4] = NULL;
    PMIX_APP_CONSTRUCT(&app);
    app.cmd = strdup(prog);
    app.argv = args;
    app.maxprocs = 1;
    rc = PMIx_Spawn(NULL, 0, &app, 1, ns);
    app.argv = NULL; /* ours, not to be freed */
    PMIX_APP_DESTRUCT(&app);
    if (rc == PMIX_SUCCESS)
        printf("rank %u spawned %s\n", myrank, ns);
    else
        printf("rank %u spawn: %s\n", myrank, PMIx_Error_string(rc));
    fflush(stdout);
}

/* event_rm sends code to the daemon, with the delta if given. */
static pmix_status_t event_rm(pmix_status_t code, const char *delta)
{
    pmix_info_t info[2];
    size_t n = 0;
    pmix_status_t rc;

    PMIX_INFO_LOAD(&info[n], PMIX_EVENT_DO_NOT_CACHE, NULL, PMIX_BOOL);
    n++;
    if (delta != NULL) {
        PMIX_INFO_LOAD(&info[n], DYNRT_PMIX_RC_DELTA, delta, PMIX_STRING);
        n++;
    }
    rc = PMIx_Notify_event(code, &me, PMIX_RANGE_RM, info, n, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        PMIX_INFO_DESTRUCT(&info[i]);
    return rc;
}

int main(int argc, char **argv)
{
    pmix_status_t rc, codes[] = {PMIX_PROCESS_SET_DEFINE, DYNRT_PMIX_RC, DYNRT_PMIX_ACCEPTED};
    int changes = argc > 1 ? atoi(argv[1]) : 1, ended = 0, fence = 0, connect = 0;
    time_t deadline = time(NULL) + (argc > 2 ? atoi(argv[2]) : 60);
    struct change c;
    char job[256];
    const char *child = NULL;
    char lastbound[512] = "";
    int byset = 0;

    for (int i = 3; i < argc; i++) {
        fence |= strcmp(argv[i], "fence") == 0;
        noaccept |= strcmp(argv[i], "noaccept") == 0;
        connect |= strcmp(argv[i], "together") == 0;
        byset |= strcmp(argv[i], "fenceset") == 0;
        if (strncmp(argv[i], "spawn=", 6) == 0)
            child = argv[i] + 6;
    }

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "rc_follow: PMIx_Init: %s (not started by a PMIx launcher?)\n", PMIx_Error_string(rc));
        return 1;
    }
    whoami(job, sizeof job);
    {
        pmix_value_t val;
        PMIX_VALUE_LOAD(&val, &myrank, PMIX_UINT32);
        PMIx_Put(PMIX_GLOBAL, "rc_follow.rank", &val);
        PMIX_VALUE_DESTRUCT(&val);
        PMIx_Commit();
    }
    rc = PMIx_Register_event_handler(codes, 3, NULL, 0, event, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "rc_follow: event handler: %s\n", PMIx_Error_string(rc));
        PMIx_Finalize(NULL, 0);
        return 1;
    }
    rc = event_rm(DYNRT_PMIX_MALLEABLE, NULL);
    printf("rank %u malleable%s%s\n", myrank, rc == PMIX_SUCCESS ? "" : ": ", rc == PMIX_SUCCESS ? "" : PMIx_Error_string(rc));
    if (joined[0] != '\0') {
        /* The changes before the one that started it (mpi://rte/APP/rc/N)
         * count as followed. */
        ended = atoi(strrchr(joined, '/') + 1) - 1;
        printf("rank %u joins %s as %s:%u of %s\n", myrank, joined, me.nspace, me.rank, job);
        rc = event_rm(DYNRT_PMIX_CONFIRM, joined);
        if (rc != PMIX_SUCCESS)
            printf("rank %u confirm: %s\n", myrank, PMIx_Error_string(rc));
    }
    fflush(stdout);
    while (ended < changes) {
        int have = 0;
        pthread_mutex_lock(&mu);
        if (qhead != qtail) {
            c = queue[qhead];
            qhead = (qhead + 1) % QLEN;
            have = 1;
        }
        pthread_mutex_unlock(&mu);
        if (!have) {
            if (time(NULL) > deadline) {
                printf("rank %u: %d of %d changes ended in time\n", myrank, ended, changes);
                fflush(stdout);
                PMIx_Finalize(NULL, 0);
                return 2;
            }
            usleep(10000);
            continue;
        }
        if (c.bound[0] != '\0') {
            copy(lastbound, sizeof lastbound, c.bound);
            lastbound[strcspn(lastbound, ",")] = '\0';
        }
        if (strcmp(c.status, "ANNOUNCED") == 0)
            announced(&c);
        else if (strcmp(c.status, "FINALIZED") == 0 || strcmp(c.status, "ABORTED") == 0) {
            ended++;
            if (c.removed && strcmp(c.status, "FINALIZED") == 0) {
                printf("rank %u leaves\n", myrank);
                fflush(stdout);
                PMIx_Finalize(NULL, 0);
                return 0;
            }
        }
    }
    if (connect)
        together(job);
    if (child != NULL && joined[0] != '\0' && me.rank == 0)
        spawn(child);
    if (byset && lastbound[0] != '\0')
        fenceset(lastbound);
    /* The job's first namespace fences twice, an ADD's once: were the
     * namespaces' fences one, the second would wait for processes that
     * never enter it. */
    for (int i = 1; fence && i <= (joined[0] != '\0' ? 1 : 2); i++) {
        rc = PMIx_Fence(NULL, 0, NULL, 0);
        if (rc == PMIX_SUCCESS)
            printf("rank %u fenced %d\n", myrank, i);
        else
            printf("rank %u fence %d: %s\n", myrank, i, PMIx_Error_string(rc));
        fflush(stdout);
    }
    printf("rank %u done\n", myrank);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
