/* dynrt_pmix.h: dynrt's PMIx event codes and info keys, for programs that
 * speak PMIx directly under dynrun --pmi pmix (docs/mpi.md, "Resource
 * changes through PMIx"). Plain constants: include it after <pmix.h>, or
 * alone; it needs no library.
 *
 * A program opts in to resource changes with one event to its daemon:
 *
 *     pmix_info_t nocache;
 *     PMIX_INFO_LOAD(&nocache, PMIX_EVENT_DO_NOT_CACHE, NULL, PMIX_BOOL);
 *     PMIx_Notify_event(DYNRT_PMIX_MALLEABLE, NULL, PMIX_RANGE_RM, &nocache, 1, NULL, NULL);
 *
 * (Every event to the daemon carries PMIX_EVENT_DO_NOT_CACHE: OpenPMIx 4.2
 * passes an event on to its host only when it does not cache it.)
 *
 * Without it (Open MPI programs never send it) dynrt refuses every change
 * of the job. Once every live process of the job has opted in, each change
 * is announced to every process with two events, both non-default (only a
 * handler registered for the code gets them):
 *
 *   PMIX_PROCESS_SET_DEFINE   PMIX_PSET_NAME = the delta set,
 *                             PMIX_PSET_MEMBERS = its processes
 *   DYNRT_PMIX_RC             DYNRT_PMIX_RC_TYPE, _STATUS, _DELTA, _BOUND,
 *                             PMIX_EVENT_AFFECTED_PROCS = the delta's ranks
 *                             (again at each new status: PENDING,
 *                             FINALIZED or ABORTED with DYNRT_PMIX_RC_ERROR)
 *
 * The root of the bound set (its lowest rank) accepts the change with
 *
 *     DYNRT_PMIX_ACCEPT to PMIX_RANGE_RM, info DYNRT_PMIX_RC_DELTA
 *
 * and gets the outcome back as DYNRT_PMIX_ACCEPTED (DYNRT_PMIX_RC_DELTA,
 * DYNRT_PMIX_RC_STATUS, or DYNRT_PMIX_RC_ERROR). A SUB's removed ranks
 * then finalize and exit 0; the others go on. ADD and REPLACE are refused
 * for PMIx jobs (their new processes would have to join a running PMIx
 * namespace). Codes are below PMIX_EXTERNAL_ERR_BASE (-3000), the range
 * PMIx leaves to hosts. */
#ifndef DYNRT_PMIX_H
#define DYNRT_PMIX_H

/* Event codes (pmix_status_t). */
#define DYNRT_PMIX_MALLEABLE -3601 /* process -> daemon: this process follows resource changes */
#define DYNRT_PMIX_RC        -3602 /* daemon -> processes: a resource change and its status */
#define DYNRT_PMIX_ACCEPT    -3603 /* root -> daemon: accept the change DYNRT_PMIX_RC_DELTA */
#define DYNRT_PMIX_ACCEPTED  -3604 /* daemon -> root: the outcome of its accept */

/* Info keys of those events (all strings). */
#define DYNRT_PMIX_RC_TYPE   "dynrt.rc.type"   /* ADD, SUB or REPLACE */
#define DYNRT_PMIX_RC_STATUS "dynrt.rc.status" /* ANNOUNCED, PENDING, FINALIZED or ABORTED */
#define DYNRT_PMIX_RC_DELTA  "dynrt.rc.delta"  /* the delta set's name */
#define DYNRT_PMIX_RC_BOUND  "dynrt.rc.bound"  /* the bound sets' names, comma-separated */
#define DYNRT_PMIX_RC_ERROR  "dynrt.rc.error"  /* why it was aborted, or the accept refused */

#endif
