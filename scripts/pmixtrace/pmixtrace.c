/* pmixtrace: an LD_PRELOAD library that timestamps the PMIx client calls
 * an Open MPI process makes (init, spawn, connect, fence, finalize), so
 * that the phases of an MPI_Comm_spawn can be compared between launchers
 * (scripts/ompi-spawn-phases.sh). Each call writes one line to stderr:
 *
 *   PMIXT <pid> <CLOCK_MONOTONIC ns> <event> [detail]
 *
 * with event init>, init<, spawn>, spawn<, connect>, connect<, fence>,
 * fence<, fin>, fin< (fin< with the process's CPU time so far, cpu_us=).
 * A write(2) of one short line is atomic, so the lines of several
 * processes on one pipe do not mix. Only the blocking calls Open MPI 4.1
 * uses on these paths are wrapped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pmix.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void trace(const char *event, const char *fmt, ...)
{
    struct timespec ts;
    char line[256];
    int n;
    va_list ap;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    n = snprintf(line, sizeof line, "PMIXT %d %lld %s ", (int)getpid(),
                 (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, event);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) {
        n = (int)sizeof line - 2;
    }
    line[n++] = '\n';
    if (write(2, line, (size_t)n) < 0) {
        /* nowhere to report it */
    }
}

/* next finds the wrapped function once; the library is useless without it. */
#define NEXT(type, name)                            \
    static type next_fn;                            \
    if (next_fn == NULL) {                          \
        next_fn = (type)dlsym(RTLD_NEXT, name);     \
    }

typedef pmix_status_t (*init_fn)(pmix_proc_t *, pmix_info_t *, size_t);
typedef pmix_status_t (*spawn_fn)(const pmix_info_t *, size_t, const pmix_app_t *, size_t, char *);
typedef pmix_status_t (*procs_fn)(const pmix_proc_t *, size_t, const pmix_info_t *, size_t);
typedef pmix_status_t (*fin_fn)(const pmix_info_t *, size_t);

pmix_status_t PMIx_Init(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo)
{
    NEXT(init_fn, "PMIx_Init");
    trace("init>", "");
    pmix_status_t rc = next_fn(proc, info, ninfo);
    trace("init<", "%s:%u %d", proc ? proc->nspace : "-", proc ? proc->rank : 0, rc);
    return rc;
}

pmix_status_t PMIx_Spawn(const pmix_info_t job_info[], size_t ninfo, const pmix_app_t apps[],
                         size_t napps, pmix_nspace_t nspace)
{
    NEXT(spawn_fn, "PMIx_Spawn");
    trace("spawn>", "%zu", napps);
    pmix_status_t rc = next_fn(job_info, ninfo, apps, napps, nspace);
    trace("spawn<", "%d", rc);
    return rc;
}

/* Connect and fence take the same arguments and are traced alike. */
#define PROCS_CALL(fn, event)                                                               \
    pmix_status_t fn(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],   \
                     size_t ninfo)                                                          \
    {                                                                                       \
        NEXT(procs_fn, #fn);                                                                \
        trace(event ">", "%zu", nprocs);                                                    \
        pmix_status_t rc = next_fn(procs, nprocs, info, ninfo);                             \
        trace(event "<", "%d", rc);                                                         \
        return rc;                                                                          \
    }

PROCS_CALL(PMIx_Connect, "connect")
PROCS_CALL(PMIx_Fence, "fence")

pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo)
{
    NEXT(fin_fn, "PMIx_Finalize");
    trace("fin>", "");
    pmix_status_t rc = next_fn(info, ninfo);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    trace("fin<", "cpu_us=%ld", (long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L +
                                        ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    return rc;
}
