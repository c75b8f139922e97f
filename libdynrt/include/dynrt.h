/*
 * dynrt.h: libdynrt, the C interface of a process launched by dynrun.
 *
 * A process opens a session with its node daemon (dynrt_init), learns who it
 * is, queries and combines process sets, exchanges key-value data, fences,
 * publishes and looks up names, follows runtime events and takes part in
 * resource changes (query, accept, confirm, request): the calls of the
 * thesis's listings 6.1-6.7 in C shape. The library speaks docs/wire.md over
 * the unix socket named by $DYNRT_DAEMON; nothing of Go runs in the process.
 *
 * Every call returns DYNRT_OK (0) or one of the dynrt_code values; the
 * message of the failure is dynrt_errmsg() (the calling thread's last one)
 * or dynrt_last_error() (the session's last one). Every call is safe from
 * any thread: a session has one connection, one reader thread that routes
 * replies to the callers waiting for them, and one mutex for its state, so
 * a blocking call (a fence, a lookup with wait, a blocking accept) in one
 * thread does not hold up the calls of another. See docs/libdynrt.md.
 */
#ifndef DYNRT_H
#define DYNRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden symbols; only what this header declares
 * is visible outside it (in the shared and in the static library). */
#ifdef DYNRT_BUILD
#pragma GCC visibility push(default)
#endif

#define DYNRT_VERSION "1.0.0"

/* Longest set name (including the NUL) the fixed-size name fields hold. */
#define DYNRT_NAME_MAX 256

/* Result codes. The first ones mirror the stable wire codes of
 * wire/errors.go (dynrt_code_name gives the wire string); the last ones are
 * the library's own. Codes never change meaning. */
typedef enum dynrt_code {
    DYNRT_OK = 0,
    DYNRT_ERR_INVALID,       /* "invalid": bad argument or request */
    DYNRT_ERR_NOT_FOUND,     /* "not_found" */
    DYNRT_ERR_EXISTS,        /* "exists" */
    DYNRT_ERR_BUSY,          /* "busy": another operation is in flight */
    DYNRT_ERR_NO_RESOURCES,  /* "no_resources": not enough free slots */
    DYNRT_ERR_BAD_STATE,     /* "bad_state": illegal state transition */
    DYNRT_ERR_TIMEOUT,       /* "timeout" */
    DYNRT_ERR_CANCELED,      /* "canceled" */
    DYNRT_ERR_ABORTED,       /* "aborted": e.g. a resource change, a fence whose participant ended */
    DYNRT_ERR_UNAUTHORIZED,  /* "unauthorized" */
    DYNRT_ERR_VERSION,       /* "version": no common protocol version */
    DYNRT_ERR_TOO_LARGE,     /* "too_large" */
    DYNRT_ERR_MALFORMED,     /* "malformed" */
    DYNRT_ERR_UNKNOWN_KIND,  /* "unknown_kind" */
    DYNRT_ERR_CLOSED,        /* "closed": the connection to the daemon is gone */
    DYNRT_ERR_UNSUPPORTED,   /* "unsupported" */
    DYNRT_ERR_INTERNAL,      /* "internal": a bug on the far side */
    DYNRT_ERR_PERMISSION,    /* "permission" */
    DYNRT_ERR_LIMIT,         /* "limit" */
    DYNRT_ERR_NO_RUNTIME = 100, /* the process was not started by dynrun (no DYNRT_* environment) */
    DYNRT_ERR_SYSTEM,        /* a system call failed (see the message) */
    DYNRT_ERR_NOMEM,         /* out of memory */
    DYNRT_ERR_UNKNOWN        /* the daemon sent a code this library does not know */
} dynrt_code;

/* Message of a code ("not found", ...). Never NULL. */
const char *dynrt_strerror(int code);
/* The wire code string of a code ("not_found", ...); "" for the library's own. */
const char *dynrt_code_name(int code);
/* Message of the calling thread's last failed call ("" if none). */
const char *dynrt_errmsg(void);

typedef struct dynrt_session dynrt_session;

/* Copies the session's last error message (of any thread) into buf. */
int dynrt_last_error(dynrt_session *s, char *buf, size_t len);

/* ---- Sessions (listing 6.7) ---------------------------------------- */

/* Opens a session: connects to $DYNRT_DAEMON as rank $DYNRT_RANK of job
 * $DYNRT_JOB. DYNRT_ERR_NO_RUNTIME when the process was not started by
 * dynrun. A process may open several sessions. */
int dynrt_init(dynrt_session **s);
/* Closes the session and frees it (also after a failure of the daemon). */
int dynrt_finalize(dynrt_session *s);
/* Asks the runtime to kill the caller's job with exit status code. */
int dynrt_abort(dynrt_session *s, int code, const char *msg);

/* Identity, known at init (no message). The strings live as long as s. */
const char *dynrt_job(const dynrt_session *s);  /* job namespace "<dvm>.<n>" */
const char *dynrt_app(const dynrt_session *s);  /* application name */
const char *dynrt_node(const dynrt_session *s); /* node name */
const char *dynrt_dvm(const dynrt_session *s);  /* DVM id */
uint32_t dynrt_rank(const dynrt_session *s);
uint64_t dynrt_uid(const dynrt_session *s);
uint32_t dynrt_size(const dynrt_session *s);    /* job size at init */
/* Delta set of the change that started this process; "" if launched with the job. */
const char *dynrt_launch_delta(const dynrt_session *s);
/* The job's current number of processes, asked from the daemon (from a change's
 * announcement on, the job after it). */
int dynrt_job_size(dynrt_session *s, uint32_t *size);

/* ---- Process sets ---------------------------------------------------- */

#define DYNRT_WORLD "mpi://WORLD"
#define DYNRT_SELF "mpi://SELF"
#define DYNRT_SHARED "mpi://SHARED"

/* One exact version of a set: name@version. */
typedef struct dynrt_pset_ref {
    char name[DYNRT_NAME_MAX];
    uint32_t version;
} dynrt_pset_ref;

/* Writes "name@version" into buf. */
int dynrt_pset_ref_format(const dynrt_pset_ref *r, char *buf, size_t len);
/* Parses "name" or "name@version" (version 0 when absent). */
int dynrt_pset_ref_parse(const char *text, dynrt_pset_ref *r);

/* A set's attributes and members (dynrt_pset_info). */
typedef struct dynrt_pset {
    char name[DYNRT_NAME_MAX];
    char job[DYNRT_NAME_MAX];
    uint32_t version;   /* mpi_ps_version */
    uint32_t epoch;     /* mpi_ps_epoch */
    int active;         /* mpi_ps_active */
    uint32_t size;      /* mpi_size */
    uint32_t *members;  /* size ranks, ascending */
    size_t nhints;      /* mpi_ps_sched_* hints, keys without the prefix */
    char **hint_keys;
    char **hint_values;
    int64_t defined_ns; /* when this version was defined (unix ns) */
} dynrt_pset;

/* The application set mpi://app/<app> of the caller's job into buf. */
int dynrt_app_set(const dynrt_session *s, char *buf, size_t len);
/* Number of sets the caller can name; takes a snapshot of their names. */
int dynrt_pset_count(dynrt_session *s, int *n);
/* The n-th name (0-based) of the last snapshot (one is taken if none). */
int dynrt_pset_name(dynrt_session *s, int n, char *buf, size_t len);
/* A set ("name" = latest, "name@v" = that version), members included.
 * Free with dynrt_pset_free. */
int dynrt_pset_info(dynrt_session *s, const char *name, dynrt_pset **out);
void dynrt_pset_free(dynrt_pset *p);
/* Whether rank is a member of p. */
int dynrt_pset_contains(const dynrt_pset *p, uint32_t rank);

typedef enum dynrt_op {
    DYNRT_UNION = 1,
    DYNRT_DIFFERENCE,
    DYNRT_INTERSECTION
} dynrt_op;

/* Result of a set operation. */
typedef struct dynrt_pset_result {
    dynrt_pset_ref set; /* the result and its new version */
    uint32_t size;
} dynrt_pset_result;

/* Applies op to p1 and p2 (listing 6.2) and stores the result as target
 * (NULL: a generated name; p1: a new version of p1). Returns once every
 * daemon holds the result. */
int dynrt_pset_op(dynrt_session *s, dynrt_op op, const char *p1, const char *p2, const char *target,
                  dynrt_pset_result *out);

/* How dynrt_pset_split divides a set: exactly one of parts, by_node, nlists. */
typedef struct dynrt_split_opts {
    uint32_t parts;             /* near-equal parts in rank order, larger first */
    int by_node;                /* one part per node holding members */
    size_t nlists;              /* these rank lists (a partition of the set) */
    const uint32_t *const *lists;
    const size_t *list_sizes;
    const char *target;         /* parts named target/<i>; NULL: generated */
} dynrt_split_opts;

/* Splits set into parts (SPLIT); *out (free with free()) gets one result
 * per part, *nparts how many. */
int dynrt_pset_split(dynrt_session *s, const char *set, const dynrt_split_opts *o, dynrt_pset_result **out,
                     size_t *nparts);
/* Deletes a set of the caller's job. */
int dynrt_pset_delete(dynrt_session *s, const char *name);

/* ---- Resource changes (listings 6.1, 6.5, 6.6) ------------------------ */

typedef enum dynrt_rc_type {
    DYNRT_RC_NULL = 0, /* no change (MPI_RC_NULL) */
    DYNRT_RC_ADD,
    DYNRT_RC_SUB,
    DYNRT_RC_REPLACE
} dynrt_rc_type;

typedef enum dynrt_rc_status {
    DYNRT_RC_STATUS_NULL = 0,
    DYNRT_RC_ANNOUNCED,
    DYNRT_RC_PENDING,
    DYNRT_RC_FINALIZED,
    DYNRT_RC_ABORTED
} dynrt_rc_status;

const char *dynrt_rc_type_name(dynrt_rc_type t);     /* "ADD", ... "NULL" */
const char *dynrt_rc_status_name(dynrt_rc_status s); /* "ANNOUNCED", ... "NULL" */

/* Step times of a change, unix ns (0 = not reached). */
typedef struct dynrt_rc_times {
    int64_t requested, announced, started, accepted, confirmed, finalized, exited, aborted;
} dynrt_rc_times;

/* A resource change. Release the arrays with dynrt_rc_release. */
typedef struct dynrt_rc {
    dynrt_rc_type type;
    dynrt_rc_status status;
    char delta[DYNRT_NAME_MAX];  /* the delta set naming the change */
    int incl;                    /* the caller is in the delta */
    uint32_t n;                  /* processes added or removed */
    uint32_t *ranks;             /* the delta's ranks */
    size_t nranks;
    uint32_t *out;               /* REPLACE: the replaced ranks */
    size_t nout;
    char out_set[DYNRT_NAME_MAX];/* REPLACE: the set of the replaced ranks */
    dynrt_pset_ref *bound;       /* bound sets at the version whose members accept */
    size_t nbound;
    int failure;                 /* the runtime made it for lost processes */
    char requester[32];          /* "tool", "app", "sched", "runtime" */
    char reason[256];            /* why it was aborted */
    dynrt_rc_times times;
} dynrt_rc;

void dynrt_rc_release(dynrt_rc *rc);

/* Listing 6.1: the latest change bound to the set bound (NULL or
 * DYNRT_SELF: the latest change that adds or removes the caller or binds a
 * set holding it) if it still needs the caller, as the daemon decides for
 * every client (rc.query with need, docs/wire.md): the caller was a member
 * of a bound set when it was announced, or is one of its new processes,
 * and the change is ANNOUNCED or PENDING and the caller has not started
 * its accept (a new process: its confirm), or it is ABORTED and not yet
 * reported to this rank (an abort is reported once; an accept or confirm
 * that failed with DYNRT_ERR_ABORTED counts). Otherwise *rc has type and
 * status NULL (MPI_RC_NULL). */
int dynrt_rc_query(dynrt_session *s, const char *bound, dynrt_rc *rc);
/* The record of one change, whatever its status. */
int dynrt_rc_get(dynrt_session *s, const char *delta, dynrt_rc *rc);

typedef struct dynrt_rc_request_opts {
    const uint32_t *ranks; /* SUB, REPLACE: exactly these ranks */
    size_t nranks;
    const char *bound;     /* bind to / take from this set; NULL = the runtime's choice */
    int wait;              /* return once settled (the caller must not be needed to accept it) */
    int queue;             /* queue behind a change in flight instead of DYNRT_ERR_BUSY; without
                              wait the reply comes at once: status NULL, no delta yet */
    int64_t grace_ms;      /* SUB, REPLACE: time the leaving processes get to exit */
    int64_t confirm_timeout_ms;
} dynrt_rc_request_opts;

/* Asks for a change of the caller's own job (an evolving application);
 * rc (may be NULL) gets the record as announced. */
int dynrt_rc_request(dynrt_session *s, dynrt_rc_type type, uint32_t n, const dynrt_rc_request_opts *o,
                     dynrt_rc *rc);
/* Aborts a change of the caller's job that is not FINALIZED. */
int dynrt_rc_cancel(dynrt_session *s, const char *delta, const char *why);

typedef struct dynrt_accept_opts {
    const char *bound; /* the bound set accepting; NULL: the only one, or the one holding the caller */
    int has_root;      /* root given (else the lowest rank of the bound set) */
    uint32_t root;
    int blocking;      /* wait until FINALIZED (or ABORTED) instead of answering PENDING */
    int64_t timeout_ms;/* bound on the collective steps and the wait; 0 = none */
} dynrt_accept_opts;

typedef struct dynrt_accept_result {
    dynrt_rc_status status; /* PENDING (an ADD not yet confirmed: accept again later) or FINALIZED */
    int terminate;          /* the caller leaves with the change: finalize and exit */
    dynrt_pset_ref set;     /* the set to continue with */
} dynrt_accept_result;

/* A non-blocking accept or confirm in progress. */
typedef struct dynrt_request dynrt_request;

/* Listing 6.5: every member of the bound set (at the version the change was
 * announced with) calls it with the same arguments; the root names in
 * new_set the set it built in phase 2 ("name@version", or a name for its
 * latest version; an ADD or REPLACE needs one; other members pass NULL).
 * DYNRT_ERR_ABORTED for an aborted change. */
int dynrt_accept(dynrt_session *s, const char *delta, const char *new_set, const dynrt_accept_opts *o,
                 dynrt_accept_result *res);
/* The same without waiting: *req completes with dynrt_test or dynrt_wait. */
int dynrt_iaccept(dynrt_session *s, const char *delta, const char *new_set, const dynrt_accept_opts *o,
                  dynrt_request **req);
/* Listing 6.6: every process an ADD or REPLACE started calls it; set gets
 * the set to continue with. */
int dynrt_confirm(dynrt_session *s, const char *delta, int64_t timeout_ms, dynrt_pset_ref *set);
int dynrt_iconfirm(dynrt_session *s, const char *delta, int64_t timeout_ms, dynrt_request **req);
/* Whether *req has completed; if so (*done = 1) its result goes to res
 * (confirm: res->set), the return value is the operation's, and *req is
 * freed and set to NULL. */
int dynrt_test(dynrt_request **req, int *done, dynrt_accept_result *res);
/* Waits for *req, then as dynrt_test. */
int dynrt_wait(dynrt_request **req, dynrt_accept_result *res);

/* ---- Key-value data and fences --------------------------------------- */

/* Stages a value of the caller (no message). */
int dynrt_put(dynrt_session *s, const char *key, const void *value, size_t len);
/* Sends the staged values; others can read them from then on. */
int dynrt_commit(dynrt_session *s);

#define DYNRT_GET_WAIT 1    /* wait for the owner's commit instead of DYNRT_ERR_NOT_FOUND */
#define DYNRT_GET_REFRESH 2 /* bypass the daemon's cache */

/* A value committed by rank of the caller's job. *value is malloc'ed (free()). */
int dynrt_get(dynrt_session *s, uint32_t rank, const char *key, int flags, int64_t timeout_ms, void **value,
              size_t *len);
/* Waits until every listed rank of the caller's job (ranks NULL: every live
 * process) has entered; id names it (NULL: derived from the list); collect
 * brings every participant's data to its daemon. */
int dynrt_fence(dynrt_session *s, const uint32_t *ranks, size_t n, const char *id, int collect,
                int64_t timeout_ms);

/* ---- Publish and lookup ----------------------------------------------- */

typedef enum dynrt_range {
    DYNRT_RANGE_JOB = 0, /* the caller's job */
    DYNRT_RANGE_DVM      /* every job of the DVM */
} dynrt_range;

int dynrt_publish(dynrt_session *s, const char *key, const void *value, size_t len, dynrt_range range);
/* With wait, returns once the key is published (or DYNRT_ERR_TIMEOUT after
 * timeout_ms, 0 = no limit). *value is malloc'ed (free()). */
int dynrt_lookup(dynrt_session *s, const char *key, dynrt_range range, int wait, int64_t timeout_ms,
                 void **value, size_t *len);
/* Removes a key the caller published (key NULL: all of them). */
int dynrt_unpublish(dynrt_session *s, const char *key, dynrt_range range);

/* ---- Events ------------------------------------------------------------ */

/* One runtime event. kind says which fields are set (docs/wire.md, Event). */
typedef struct dynrt_event {
    uint64_t sub;       /* the subscription it matched */
    uint64_t seq;
    int64_t time_ns;
    char *kind;         /* "rc.state", "pset.def", "proc.state", "job.state", "app", "node.down", ... */
    char *job;
    char *node;
    char *state;
    char *msg;
    int code, signal;
    uint32_t *ranks;
    size_t nranks;
    dynrt_pset_ref pset;        /* pset.def, pset.del */
    char rc_delta[DYNRT_NAME_MAX]; /* rc.state */
    dynrt_rc_type rc_type;
    dynrt_rc_status rc_status;
    char *src_job;              /* app: the raiser */
    uint32_t src_rank;
    size_t ndata;               /* app: payload */
    char **data_keys, **data_values;
} dynrt_event;

void dynrt_event_free(dynrt_event *ev);

/* Called on the session's event thread, in event order; it may call the
 * session. It must not free ev (the library does after it returns). */
typedef void (*dynrt_event_fn)(dynrt_session *s, const dynrt_event *ev, void *arg);

/* Subscribes to events whose kind starts with one of kinds (nkinds 0: all).
 * With fn, they go to fn; without, they queue for dynrt_event_poll. */
int dynrt_subscribe(dynrt_session *s, const char *const *kinds, size_t nkinds, dynrt_event_fn fn, void *arg,
                    uint64_t *id);
/* Ends one subscription (0: all of the session's). */
int dynrt_unsubscribe(dynrt_session *s, uint64_t id);
/* The next queued event, waiting up to timeout_ms (0: do not wait, -1: no
 * limit); DYNRT_ERR_TIMEOUT when none came. Free with dynrt_event_free. */
int dynrt_event_poll(dynrt_session *s, int timeout_ms, dynrt_event **ev);
/* Raises an application event ("app") with the caller as its source. */
int dynrt_notify(dynrt_session *s, const char *msg, const char *const *keys, const char *const *values,
                 size_t n);

#ifdef DYNRT_BUILD
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* DYNRT_H */
