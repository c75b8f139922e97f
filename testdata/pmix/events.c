/* events: a plain PMIx client for dynrt's event notification and job
 * control host callbacks.
 *
 *   events notify        send DYNRT_PMIX_MALLEABLE to the host (info
 *                        dynrt.test=hello), then wait up to 20 s for one
 *                        event of code DYNRT_PMIX_RC and print it
 *   events kill T        rank 0: PMIx_Job_control_nb(KILL) of rank T of
 *                        its namespace (T = "all": the whole namespace,
 *                        "none": no targets), then exits (or, after a
 *                        granted "all" or "none", waits up to 20 s to be
 *                        killed, unless EVENTS_NO_WAIT is set);
 *                        others wait up to 20 s for SIGUSR1 or the end
 *   events signal T SIG  the same with PMIX_JOB_CTRL_SIGNAL SIG
 *
 * In kill and signal modes every rank fences first, so that all have
 * their SIGUSR1 handler when rank 0 acts.
 *
 * Lines: "rank R event CODE from SRC: KEY=VALUE ..." (SRC and procs as
 * job:RANK for the caller's namespace, other:RANK else) and
 * "rank R job control: STATUS". Exit 0 unless PMIx_Init fails (1) or the
 * awaited event does not come (2). Build: cc -I libdynrt/include events.c
 * $(pkg-config --cflags --libs pmix). */
#define _DEFAULT_SOURCE
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "dynrt_pmix.h"
#include "pmixprint.h"

static volatile int got, ctl_done;
static volatile pmix_status_t ctl_status;
static volatile sig_atomic_t signalled;

static void event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                  size_t ninfo, pmix_info_t results[], size_t nresults,
                  pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    char line[4096], v[1024], src[300];
    size_t used;

    (void)id;
    (void)results;
    (void)nresults;
    proc(src, sizeof src, source);
    used = snprintf(line, sizeof line, "rank %u event %d from %s:", me.rank, status, src);
    for (size_t i = 0; i < ninfo && used + 1 < sizeof line; i++) {
        if (strncmp(info[i].key, "pmix.", 5) == 0 && strcmp(info[i].key, PMIX_EVENT_AFFECTED_PROCS) != 0)
            continue; /* libpmix's own bookkeeping */
        value(v, sizeof v, &info[i].value);
        used += snprintf(line + used, sizeof line - used, " %s=%s", info[i].key, v);
    }
    printf("%s\n", line);
    fflush(stdout);
    got = 1;
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void ctl_cb(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                   pmix_release_cbfunc_t release_fn, void *release_cbdata)
{
    (void)info;
    (void)ninfo;
    (void)cbdata;
    ctl_status = status;
    ctl_done = 1;
    if (release_fn != NULL)
        release_fn(release_cbdata);
}

static void on_signal(int sig)
{
    signalled = sig;
}

/* wait_for waits up to 20 s for *flag. */
static int wait_for(volatile int *flag)
{
    for (int i = 0; i < 2000 && !*flag && !signalled; i++)
        usleep(10000);
    return *flag;
}

int main(int argc, char **argv)
{
    pmix_status_t rc, codes[] = {DYNRT_PMIX_RC};
    pmix_info_t *info;
    pmix_proc_t target;
    const char *mode = argc > 1 ? argv[1] : "notify";
    uint32_t n = 7;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "events: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    signal(SIGUSR1, on_signal);
    if (strcmp(mode, "notify") != 0 && (rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        /* Every rank has its handler before rank 0 acts. */
        fprintf(stderr, "events: PMIx_Fence: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (strcmp(mode, "notify") == 0) {
        rc = PMIx_Register_event_handler(codes, 1, NULL, 0, event, NULL, NULL);
        if (rc < 0)
            printf("rank %u register: %s\n", me.rank, PMIx_Error_string(rc));
        PMIX_INFO_CREATE(info, 3);
        PMIX_INFO_LOAD(&info[0], "dynrt.test", "hello", PMIX_STRING);
        PMIX_INFO_LOAD(&info[1], "dynrt.n", &n, PMIX_UINT32);
        PMIX_INFO_LOAD(&info[2], PMIX_EVENT_DO_NOT_CACHE, NULL, PMIX_BOOL); /* see dynrt_pmix.h */
        rc = PMIx_Notify_event(DYNRT_PMIX_MALLEABLE, &me, PMIX_RANGE_RM, info, 3, NULL, NULL);
        printf("rank %u notify: %s\n", me.rank, PMIx_Error_string(rc));
        fflush(stdout);
        PMIX_INFO_FREE(info, 3);
        if (!wait_for(&got)) {
            printf("rank %u: no event\n", me.rank);
            PMIx_Finalize(NULL, 0);
            return 2;
        }
    } else if (me.rank == 0) {
        size_t ntargets = 1;
        PMIX_INFO_CREATE(info, 1);
        if (strcmp(mode, "signal") == 0) {
            int sig = argc > 3 ? atoi(argv[3]) : SIGUSR1;
            PMIX_INFO_LOAD(&info[0], PMIX_JOB_CTRL_SIGNAL, &sig, PMIX_INT);
        } else {
            PMIX_INFO_LOAD(&info[0], PMIX_JOB_CTRL_KILL, NULL, PMIX_BOOL);
        }
        const char *t = argc > 2 ? argv[2] : "1";
        PMIX_LOAD_PROCID(&target, me.nspace, strcmp(t, "all") == 0 ? PMIX_RANK_WILDCARD : (pmix_rank_t)atoi(t));
        if (strcmp(t, "none") == 0)
            ntargets = 0;
        rc = PMIx_Job_control_nb(ntargets ? &target : NULL, ntargets, info, 1, ctl_cb, NULL);
        if (rc == PMIX_SUCCESS)
            wait_for(&ctl_done);
        else
            ctl_status = rc;
        printf("rank %u job control: %s\n", me.rank, PMIx_Error_string(ctl_status));
        fflush(stdout);
        PMIX_INFO_FREE(info, 1);
        /* Killed with the others, if the request was about its own job. */
        if (ctl_status == PMIX_SUCCESS && (strcmp(t, "all") == 0 || strcmp(t, "none") == 0) &&
            getenv("EVENTS_NO_WAIT") == NULL)
            wait_for(&got);
    } else {
        wait_for(&got); /* until killed or signalled, at most 20 s */
        if (signalled)
            printf("rank %u got signal %d\n", me.rank, (int)signalled);
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}
