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
 *                             PMIX_EVENT_AFFECTED_PROCS = the delta's ranks,
 *                             for a REPLACE DYNRT_PMIX_RC_OUT = the replaced
 *                             (again at each new status: PENDING,
 *                             FINALIZED or ABORTED with DYNRT_PMIX_RC_ERROR)
 *
 * The root of the bound set (its lowest rank) accepts the change with
 *
 *     DYNRT_PMIX_ACCEPT to PMIX_RANGE_RM, info DYNRT_PMIX_RC_DELTA
 *
 * and gets the outcome back as DYNRT_PMIX_ACCEPTED (DYNRT_PMIX_RC_DELTA,
 * DYNRT_PMIX_RC_STATUS, or DYNRT_PMIX_RC_ERROR); for an ADD its daemon
 * first makes the bound set's new version UNION(bound set, delta), for a
 * REPLACE then DIFFERENCE(that, the replaced set), for a SUB
 * DIFFERENCE(bound set, delta); DYNRT_PMIX_ACCEPTED then carries that set
 * as DYNRT_PMIX_RC_BOUND. Once FINALIZED, a SUB's
 * removed ranks and a REPLACE's replaced ones finalize and exit 0; the
 * others go on.
 *
 * Ranks and namespaces. PMIx cannot grow a running namespace, so the
 * processes an ADD (or a REPLACE) starts form a namespace of their own, NS.rcN (NS the
 * job's namespace, N the change's number, as in its delta set
 * mpi://rte/APP/rc/N), PMIx ranks 0..n-1, while they are dynrt ranks
 * BASE..BASE+n-1 of the same job. Every namespace of the job carries the
 * job-level info (PMIx_Get with PMIX_RANK_WILDCARD of the namespace)
 *
 *   DYNRT_PMIX_JOB   string: the dynrt job (the first namespace's name)
 *   DYNRT_PMIX_BASE  uint32: the dynrt rank of PMIx rank 0 (0 in the first)
 *
 * and the namespace of an ADD also DYNRT_PMIX_RC_DELTA: that change. Its
 * processes are not told of it by events: each confirms it with
 *
 *     DYNRT_PMIX_CONFIRM to PMIX_RANGE_RM, info DYNRT_PMIX_RC_DELTA
 *
 * and gets DYNRT_PMIX_ACCEPTED with status FINALIZED once every one of
 * them confirmed after the root accepted (or DYNRT_PMIX_RC_ERROR); later
 * changes reach them like everyone else. Every process named in an event
 * or a query answer (delta members, affected procs, set members) carries
 * its real PMIx name, so the running processes see the new ones in their
 * namespace. Codes are below
 * PMIX_EXTERNAL_ERR_BASE (-3000), the range PMIx leaves to hosts. */
#ifndef DYNRT_PMIX_H
#define DYNRT_PMIX_H

/* Event codes (pmix_status_t). */
#define DYNRT_PMIX_MALLEABLE -3601 /* process -> daemon: this process follows resource changes */
#define DYNRT_PMIX_RC        -3602 /* daemon -> processes: a resource change and its status */
#define DYNRT_PMIX_ACCEPT    -3603 /* root -> daemon: accept the change DYNRT_PMIX_RC_DELTA */
#define DYNRT_PMIX_ACCEPTED  -3604 /* daemon -> root or new process: the outcome of its accept or confirm */
#define DYNRT_PMIX_CONFIRM   -3605 /* new process -> daemon: confirm the ADD DYNRT_PMIX_RC_DELTA */

/* Info keys of those events (strings but DYNRT_PMIX_RC_OUT; DYNRT_PMIX_RC_DELTA is also job info). */
#define DYNRT_PMIX_RC_TYPE   "dynrt.rc.type"   /* ADD, SUB or REPLACE */
#define DYNRT_PMIX_RC_STATUS "dynrt.rc.status" /* ANNOUNCED, PENDING, FINALIZED or ABORTED */
#define DYNRT_PMIX_RC_DELTA  "dynrt.rc.delta"  /* the delta set's name */
#define DYNRT_PMIX_RC_BOUND  "dynrt.rc.bound"  /* the bound sets' names, comma-separated */
#define DYNRT_PMIX_RC_ERROR  "dynrt.rc.error"  /* why it was aborted, or the accept refused */
#define DYNRT_PMIX_RC_OUT    "dynrt.rc.out"    /* REPLACE: the replaced processes (PMIX_DATA_ARRAY of PMIX_PROC) */

/* Job-level info of every namespace of a dynrt job. */
#define DYNRT_PMIX_JOB       "dynrt.job"       /* string: the dynrt job */
#define DYNRT_PMIX_BASE      "dynrt.base"      /* uint32: dynrt rank of PMIx rank 0 */

#endif
