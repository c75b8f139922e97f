/*
 * c-synthetic: the thesis's synthetic benchmark (§8.1.1, listings 6.7 and
 * 8.1) in C on libdynrt; docs/synthetic.md describes the Go original, whose
 * JSON lines this program writes too (examples/synthetic/report reads
 * them, scripts/rcplot -tables prints the thesis's tables from them).
 *
 * One iteration over the current process set S (every member knows S):
 *   rebalance  this process's slice of the sampling points (its index in S)
 *   sync       a fence over S
 *   work       count the points of the slice inside the box
 *   allreduce  put the count, fence over S collecting the data, get every
 *              member's count and sum: the sum must equal the first
 *              iteration's (a new process gets that from the root)
 *   change     the root (lowest rank of S): phase 1 (ask for a change with
 *              --trigger app; query), phase 2 (the set operation); its
 *              decision goes to everyone through the key-value store; then
 *              phase 3, everyone accepts (dynrt_iaccept + dynrt_wait, or a
 *              blocking dynrt_accept with -b); once FINALIZED, S is the new
 *              set. A process a SUB (or REPLACE) removes finalizes and exits.
 *
 * A process started by an ADD or REPLACE confirms (dynrt_confirm), waits for
 * the root's "j:<delta>" (the iteration to join at and the expected sum)
 * and enters the loop there. Under dynrun --on-failure shrink a lost
 * process fails a fence for everyone; the survivors find the failure
 * change, the lowest survivor builds the set without the lost ranks, all
 * accept it and redo the iteration. A lost root ends the run (status 3,
 * with a report): its record of the changes went with it.
 *
 * Exit status: 0; 1 when the run failed (an error, a wrong sum); 2 on a
 * usage error; 3 when the root was lost.
 */
#include <dynrt.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IDLEN (2 * DYNRT_NAME_MAX + 64)
#define MAXCHANGES 256

/* Thesis listing 8.1, read physically (docs/synthetic.md). */
static const double v0 = 25.0, gravity = 9.81, x0 = 0.0, y00 = 1.5, horizon = 4.5;
static const double xmin = 12.0, xmax = 40.0, ymin = 8.0, ymax = 30.0;

static int64_t work(int64_t problem, int64_t lo, int64_t hi) {
    double dt = horizon / (double)problem;
    double beta = M_PI / 3;
    double vx = v0 * cos(beta), vy = v0 * sin(beta);
    int64_t n = 0;
    for (int64_t i = lo; i < hi; i++) {
        double t = (double)i * dt;
        double x = vx * t + x0;
        double y = vy * t - gravity / 2 * t * t + y00;
        if (x > xmin && x < xmax && y > ymin && y < ymax) {
            n++;
        }
    }
    return n;
}

static void partition(int64_t problem, size_t k, size_t n, int64_t *lo, int64_t *hi) {
    int64_t size = problem / (int64_t)n;
    *lo = size * (int64_t)k;
    *hi = k == n - 1 ? problem : *lo + size;
}

typedef struct config {
    int iters, freq, start, limit, delta, blocking, changes, skew;
    int64_t problem;
    const char *trigger;
    const char *hold; /* --test-hold DIR */
    int linger;       /* --test-linger MS */
} config;

typedef struct pset {
    dynrt_pset_ref ref;
    char text[DYNRT_NAME_MAX + 16]; /* name@version */
    uint32_t *m;
    size_t n;
} pset;

/* One change as the root records it (report.Change). */
typedef struct change {
    char delta[DYNRT_NAME_MAX];
    dynrt_rc_type type;
    int n, from, to, first, last, pending;
    double query, phase2, phase3, comm, overhead;
} change;

typedef struct app {
    config c;
    dynrt_session *s;
    uint32_t me;
    pset set;
    int64_t expected;
    int iter;
    /* The change in flight, as the root decided it. */
    char delta[DYNRT_NAME_MAX];
    dynrt_rc_type type;
    char newset[DYNRT_NAME_MAX + 16];
    /* Root only. */
    change changes[MAXCHANGES];
    int nchanges, next_due, ended, refused, asked, requests;
    struct timespec t0;
} app;

static app A;

static double ms_since(const struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return round(((double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6) * 1e3) / 1e3;
}

static void now(struct timespec *t) { clock_gettime(CLOCK_MONOTONIC, t); }

static double ns_ms(int64_t a, int64_t b) { return a == 0 || b == 0 ? 0 : round((double)(b - a) / 1e3) / 1e3; }

/* Ends the run: the job is aborted with status code so that no process
 * hangs in a collective step with one that has failed. */
static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "c-synthetic: rank %u: %s\n", A.me, msg);
    fflush(stderr);
    if (A.s != NULL) {
        dynrt_abort(A.s, code, msg);
    }
    exit(code);
}

#define CALL(x)                                                                                                        \
    do {                                                                                                               \
        int rc_ = (x);                                                                                                 \
        if (rc_ != DYNRT_OK) {                                                                                         \
            die(1, "%s: %s", #x, dynrt_errmsg());                                                                      \
        }                                                                                                              \
    } while (0)

static void load_set(pset *p, const dynrt_pset_ref *ref) {
    free(p->m);
    p->ref = *ref;
    CALL(dynrt_pset_ref_format(ref, p->text, sizeof p->text));
    dynrt_pset *info;
    CALL(dynrt_pset_info(A.s, p->text, &info));
    p->m = info->members;
    p->n = info->size;
    info->members = NULL;
    dynrt_pset_free(info);
}

static size_t index_of(const pset *p, uint32_t r) {
    for (size_t i = 0; i < p->n; i++) {
        if (p->m[i] == r) {
            return i;
        }
    }
    die(1, "rank %u is not a member of %s", r, p->text);
}

/* A step over the set that may fail when a member was lost. */
static int fence(const char *what, int collect) {
    char id[IDLEN];
    snprintf(id, sizeof id, "%s:%s:%d", what, A.set.text, A.iter);
    return dynrt_fence(A.s, A.set.m, A.set.n, id, collect, 0);
}

static int get_int(uint32_t rank, const char *key, int64_t *v) {
    void *b;
    size_t len;
    int rc = dynrt_get(A.s, rank, key, 0, 0, &b, &len);
    if (rc == DYNRT_OK) {
        *v = strtoll(b, NULL, 10);
        free(b);
    }
    return rc;
}

static void put_str(const char *key, const char *v) {
    CALL(dynrt_put(A.s, key, v, strlen(v)));
    CALL(dynrt_commit(A.s));
}

/* The root's phase 1 and 2: returns the decision "<iter> <stop> <type>
 * <delta> <newset>" ("-" for none). */
static void decide(char *dec, size_t len, double *query, double *phase1, double *phase2) {
    struct timespec t;
    now(&t);
    int app_trigger = strcmp(A.c.trigger, "app") == 0;
    size_t size = A.set.n;
    /* A request queued behind a change still settling is answered at once
     * (status NULL): it is found by the query once announced, and not asked
     * for again meanwhile (asked). */
    if (A.delta[0] == 0 && app_trigger && !A.asked && A.iter >= A.next_due && (int)size != A.c.limit &&
        A.c.delta > 0) {
        dynrt_rc_type type = A.c.limit > (int)size ? DYNRT_RC_ADD : DYNRT_RC_SUB;
        int n = abs(A.c.limit - (int)size) < A.c.delta ? abs(A.c.limit - (int)size) : A.c.delta;
        dynrt_rc_request_opts o = {.queue = 1};
        int e = dynrt_rc_request(A.s, type, (uint32_t)n, &o, NULL);
        /* bad_state: the job is not running yet (still being launched):
         * ask again in the next iteration. */
        if (e == DYNRT_ERR_BAD_STATE && ++A.refused < 100) {
            A.next_due = A.iter + 1;
        } else if (e != DYNRT_OK) {
            die(1, "request a %s of %d: %s", dynrt_rc_type_name(type), n, dynrt_errmsg());
        } else {
            A.asked = 1;
            A.requests++;
        }
    }
    dynrt_rc rc = {0};
    if (A.delta[0] == 0) {
        CALL(dynrt_rc_query(A.s, NULL, &rc));
    }
    *query = ms_since(&t);
    if (rc.type != DYNRT_RC_NULL && rc.status == DYNRT_RC_ANNOUNCED) {
        /* Phase 2: the set to continue with. */
        now(&t);
        dynrt_pset_result r;
        /* A new version of the set: the next change is bound to it too. */
        const char *name = A.set.ref.name;
        if (rc.type == DYNRT_RC_ADD) {
            CALL(dynrt_pset_op(A.s, DYNRT_UNION, name, rc.delta, name, &r));
        } else if (rc.type == DYNRT_RC_SUB) {
            CALL(dynrt_pset_op(A.s, DYNRT_DIFFERENCE, name, rc.delta, name, &r));
        } else {
            CALL(dynrt_pset_op(A.s, DYNRT_UNION, name, rc.delta, name, &r));
            CALL(dynrt_pset_op(A.s, DYNRT_DIFFERENCE, name, rc.out_set, name, &r));
        }
        *phase2 = ms_since(&t);
        *phase1 = ns_ms(rc.times.requested, rc.times.announced);
        snprintf(A.delta, sizeof A.delta, "%s", rc.delta);
        A.type = rc.type;
        A.asked = 0;
        dynrt_pset_ref_format(&r.set, A.newset, sizeof A.newset);
        if (A.nchanges < MAXCHANGES) {
            change *c = &A.changes[A.nchanges++];
            memset(c, 0, sizeof *c);
            snprintf(c->delta, sizeof c->delta, "%s", rc.delta);
            c->type = rc.type;
            c->n = (int)rc.n;
            c->from = (int)size;
            c->first = A.iter;
            c->query = *query;
            c->phase2 = *phase2;
        }
    }
    dynrt_rc_release(&rc);
    int stop = A.delta[0] == 0 && A.iter + 1 >= A.c.iters &&
               (app_trigger ? ((int)size == A.c.limit || A.c.delta == 0) : A.ended >= A.c.changes);
    snprintf(dec, len, "%d %d %s %s %s", A.iter, stop, A.delta[0] ? dynrt_rc_type_name(A.type) : "-",
             A.delta[0] ? A.delta : "-", A.delta[0] ? A.newset : "-");
}

/* Phase 3 for this iteration; returns the status after it. */
static dynrt_rc_status accept_step(double *phase3, double *comm) {
    int root = A.me == A.set.m[0];
    dynrt_accept_opts o = {.blocking = A.c.blocking};
    dynrt_accept_result res;
    struct timespec t;
    now(&t);
    if (A.c.blocking) {
        CALL(dynrt_accept(A.s, A.delta, root ? A.newset : NULL, &o, &res));
    } else {
        dynrt_request *req;
        CALL(dynrt_iaccept(A.s, A.delta, root ? A.newset : NULL, &o, &req));
        CALL(dynrt_wait(&req, &res));
    }
    *phase3 = ms_since(&t);
    if (res.terminate) {
        if (A.c.linger > 0) {
            usleep((useconds_t)A.c.linger * 1000); /* the SUB stays in flight meanwhile */
        }
        free(A.set.m);
        CALL(dynrt_finalize(A.s));
        exit(0);
    }
    /* A SUB is complete for this set once accepted (other sets may still
     * have to); an ADD or REPLACE once FINALIZED. */
    int done = res.status == DYNRT_RC_FINALIZED || A.type == DYNRT_RC_SUB;
    if (!done) {
        return res.status;
    }
    now(&t);
    dynrt_pset_ref ref;
    CALL(dynrt_pset_ref_parse(A.newset, &ref));
    load_set(&A.set, &ref);
    *comm = ms_since(&t);
    if (root && A.type != DYNRT_RC_SUB) {
        /* Where the new processes join: the next iteration. */
        char key[IDLEN], v[64];
        snprintf(key, sizeof key, "j:%s", A.delta);
        snprintf(v, sizeof v, "%d %" PRId64, A.iter + 1, A.expected);
        put_str(key, v);
    }
    A.delta[0] = 0;
    return DYNRT_RC_FINALIZED;
}

/* A loss under --on-failure shrink: the failure change, the set without
 * the lost ranks built by the lowest survivor, everyone's accept. */
static void recover(int err) {
    dynrt_rc rc = {0};
    for (int i = 0; i < 300; i++) {
        CALL(dynrt_rc_query(A.s, NULL, &rc));
        if (rc.type != DYNRT_RC_NULL && rc.failure) {
            break;
        }
        dynrt_rc_release(&rc);
        usleep(20000);
    }
    if (rc.type == DYNRT_RC_NULL) {
        die(1, "a step failed (%s) and no failure change came: %s", dynrt_strerror(err), dynrt_errmsg());
    }
    uint32_t first = UINT32_MAX;
    for (size_t i = 0; i < A.set.n; i++) {
        int lost = 0;
        for (size_t j = 0; j < rc.nranks; j++) {
            lost |= rc.ranks[j] == A.set.m[i];
        }
        if (!lost) {
            first = A.set.m[i];
            break;
        }
    }
    for (size_t j = 0; j < rc.nranks; j++) {
        if (rc.ranks[j] == A.set.m[0]) {
            if (A.me == first) {
                die(3, "the root (rank %u) was lost (%s): its record of the run went with it; the run ends here",
                    A.set.m[0], rc.delta);
            }
            pause(); /* the abort of the new root ends this process */
        }
    }
    char key[IDLEN];
    snprintf(key, sizeof key, "f:%s", rc.delta);
    char newset[DYNRT_NAME_MAX + 16];
    if (A.me == first) {
        dynrt_pset_result r;
        CALL(dynrt_pset_op(A.s, DYNRT_DIFFERENCE, A.set.ref.name, rc.delta, A.set.ref.name, &r));
        dynrt_pset_ref_format(&r.set, newset, sizeof newset);
        put_str(key, newset);
    } else {
        void *v;
        CALL(dynrt_get(A.s, first, key, DYNRT_GET_WAIT, 30000, &v, NULL));
        snprintf(newset, sizeof newset, "%s", (char *)v);
        free(v);
    }
    dynrt_accept_opts o = {.has_root = 1, .root = first, .timeout_ms = 30000};
    dynrt_accept_result res;
    CALL(dynrt_accept(A.s, rc.delta, A.me == first ? newset : NULL, &o, &res));
    fprintf(stderr, "c-synthetic: rank %u: recovered from the loss of %zu rank(s) (%s) at iteration %d\n", A.me,
            rc.nranks, rc.delta, A.iter);
    dynrt_pset_ref ref;
    CALL(dynrt_pset_ref_parse(newset, &ref));
    load_set(&A.set, &ref);
    dynrt_rc_release(&rc);
}

static void iter_line(double rebalance, double sync, double own, double workms, double rcms, double query,
                      double p1, double p2, double p3, double comm, const char *delta, dynrt_rc_type type,
                      int n, dynrt_rc_status st, int64_t count, size_t procs) {
    printf("{\"kind\":\"iter\",\"iter\":%d,\"procs\":%zu,\"work_ms\":%.3f,\"own_work_ms\":%.3f,\"rebalance_ms\":%.3f,"
           "\"sync_ms\":%.3f,\"rc_ms\":%.3f,\"query_ms\":%.3f,\"phase1_ms\":%.3f,\"phase2_ms\":%.3f,"
           "\"phase3_ms\":%.3f,\"comm_ms\":%.3f",
           A.iter, procs, workms, own, rebalance, sync, rcms, query, p1, p2, p3, comm);
    if (delta[0]) {
        printf(",\"delta\":\"%s\",\"rc_type\":\"%s\",\"rc_n\":%d,\"rc_status\":\"%s\"", delta, dynrt_rc_type_name(type),
               n, dynrt_rc_status_name(st));
    }
    printf(",\"count\":%" PRId64 "}\n", count);
}

/* One iteration; 0 when the run ends after it. */
/* --test-hold DIR: at iteration 3 each process creates DIR/<rank> and
 * waits for DIR/go, so that a test can kill one at a known point. */
static void hold(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%u", A.c.hold, A.me);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        die(1, "--test-hold: create %s", path);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/go", A.c.hold);
    while (access(path, F_OK) != 0) {
        usleep(10000);
    }
}

static int iterate(void) {
    if (A.c.hold != NULL && A.iter == 3) {
        hold();
    }
    struct timespec t;
    now(&t);
    int64_t lo, hi;
    partition(A.c.problem, index_of(&A.set, A.me), A.set.n, &lo, &hi);
    double rebalance = ms_since(&t);
    now(&t);
    int e = fence("sync", 0);
    if (e != DYNRT_OK) {
        recover(e);
        return 1;
    }
    double sync = ms_since(&t);
    struct timespec tw;
    now(&tw);
    int64_t count = work(A.c.problem, lo, hi) + A.c.skew;
    double own = ms_since(&tw);
    char key[64], v[64];
    snprintf(key, sizeof key, "c:%d", A.iter);
    snprintf(v, sizeof v, "%" PRId64, count);
    put_str(key, v);
    if ((e = fence("sum", 1)) != DYNRT_OK) {
        recover(e);
        return 1;
    }
    int64_t sum = 0;
    for (size_t i = 0; i < A.set.n; i++) {
        int64_t c;
        if ((e = get_int(A.set.m[i], key, &c)) != DYNRT_OK) {
            recover(e);
            return 1;
        }
        sum += c;
    }
    double workms = ms_since(&tw);
    if (A.expected == 0) {
        A.expected = sum;
    } else if (sum != A.expected) {
        die(1, "iteration %d with %zu processes: work result %" PRId64 ", want %" PRId64, A.iter, A.set.n, sum,
            A.expected);
    }
    /* The change step. */
    struct timespec tr;
    now(&tr);
    int root = A.me == A.set.m[0];
    double query = 0, p1 = 0, p2 = 0, p3 = 0, comm = 0;
    char dec[3 * DYNRT_NAME_MAX], dkey[64];
    snprintf(dkey, sizeof dkey, "d:%d", A.iter);
    if (root) {
        decide(dec, sizeof dec, &query, &p1, &p2);
        put_str(dkey, dec);
    }
    uint32_t rootrank = A.set.m[0];
    size_t procs = A.set.n;
    if ((e = fence("decision", 1)) != DYNRT_OK) {
        recover(e);
        return 1;
    }
    if (!root) {
        void *d;
        if ((e = dynrt_get(A.s, rootrank, dkey, 0, 0, &d, NULL)) != DYNRT_OK) {
            recover(e);
            return 1;
        }
        snprintf(dec, sizeof dec, "%s", (char *)d);
        free(d);
    }
    int it, stop;
    char type[16], delta[DYNRT_NAME_MAX], newset[DYNRT_NAME_MAX + 16];
    if (sscanf(dec, "%d %d %15s %255s %271s", &it, &stop, type, delta, newset) != 5) {
        die(1, "cannot read the root's decision %s", dec);
    }
    if (it != A.iter) {
        die(1, "at iteration %d, the root at %d", A.iter, it);
    }
    dynrt_rc_status st = DYNRT_RC_STATUS_NULL;
    dynrt_rc_type rtype = DYNRT_RC_NULL;
    char logdelta[DYNRT_NAME_MAX] = "";
    if (strcmp(delta, "-") != 0) {
        snprintf(A.delta, sizeof A.delta, "%s", delta);
        snprintf(A.newset, sizeof A.newset, "%s", newset);
        A.type = strcmp(type, "ADD") == 0 ? DYNRT_RC_ADD : strcmp(type, "SUB") == 0 ? DYNRT_RC_SUB : DYNRT_RC_REPLACE;
        rtype = A.type;
        snprintf(logdelta, sizeof logdelta, "%s", delta);
        st = accept_step(&p3, &comm);
    }
    double rcms = ms_since(&tr);
    if (root) {
        int n = 0;
        if (logdelta[0]) {
            /* The change's record, by the delta that was in flight. */
            for (int i = A.nchanges - 1; i >= 0; i--) {
                change *c = &A.changes[i];
                if (strcmp(c->delta, logdelta) != 0) {
                    continue;
                }
                n = c->n;
                c->phase3 = round((c->phase3 + p3) * 1e3) / 1e3;
                c->comm += comm;
                c->overhead = round((c->overhead + rcms) * 1e3) / 1e3;
                c->last = A.iter;
                if (st == DYNRT_RC_PENDING) {
                    c->pending++;
                } else {
                    c->to = (int)A.set.n;
                    A.ended++;
                    A.next_due = A.iter + A.c.freq;
                }
                break;
            }
        }
        iter_line(rebalance, sync, own, workms, rcms, query, p1, p2, p3, comm, logdelta, rtype, n, st, sum, procs);
    }
    A.iter++;
    return !stop;
}

static void report_end(void) {
    for (int i = 0; i < A.nchanges; i++) {
        change *c = &A.changes[i];
        dynrt_rc rc;
        CALL(dynrt_rc_get(A.s, c->delta, &rc));
        /* A SUB's exits come after FINALIZED: wait a little for them. */
        for (int k = 0; k < 100 && rc.type == DYNRT_RC_SUB && rc.times.exited == 0; k++) {
            dynrt_rc_release(&rc);
            usleep(20000);
            CALL(dynrt_rc_get(A.s, c->delta, &rc));
        }
        dynrt_rc_times *t = &rc.times;
        printf("{\"kind\":\"rc\",\"delta\":\"%s\",\"type\":\"%s\",\"status\":\"%s\",\"requester\":\"%s\",\"n\":%d,"
               "\"from\":%d,\"to\":%d,\"blocking\":%s,\"mode\":\"inc\",\"announced_ms\":%.3f,\"started_ms\":%.3f,"
               "\"accepted_ms\":%.3f,\"confirmed_ms\":%.3f,\"finalized_ms\":%.3f,\"exited_ms\":%.3f,"
               "\"phase1_ms\":%.3f,\"query_ms\":%.3f,\"phase2_ms\":%.3f,\"phase3_ms\":%.3f,\"comm_ms\":%.3f,"
               "\"overhead_ms\":%.3f,\"first_iter\":%d,\"last_iter\":%d,\"pending_iters\":%d}\n",
               c->delta, dynrt_rc_type_name(rc.type), dynrt_rc_status_name(rc.status), rc.requester, c->n, c->from,
               c->to, A.c.blocking ? "true" : "false", ns_ms(t->requested, t->announced),
               ns_ms(t->requested, t->started), ns_ms(t->requested, t->accepted), ns_ms(t->requested, t->confirmed),
               ns_ms(t->requested, t->finalized), ns_ms(t->requested, t->exited), ns_ms(t->requested, t->announced),
               c->query, c->phase2, c->phase3, c->comm, c->overhead, c->first, c->last, c->pending);
        dynrt_rc_release(&rc);
    }
    printf("{\"kind\":\"end\",\"mode\":\"inc\",\"trigger\":\"%s\",\"start\":%d,\"limit\":%d,\"delta\":%d,\"f\":%d,"
           "\"iters\":%d,\"blocking\":%s,\"problem_size\":%" PRId64 ",\"count\":%" PRId64 ",\"final_procs\":%zu,"
           "\"wall_ms\":%.3f,\"changes\":%d,\"requests\":%d}\n",
           A.c.trigger, A.c.start, A.c.limit, A.c.delta, A.c.freq, A.iter, A.c.blocking ? "true" : "false",
           A.c.problem, A.expected, A.set.n, ms_since(&A.t0), A.nchanges, A.requests);
}

/* A process started by an ADD or REPLACE: confirm (listing 6.6), then the
 * root tells where the loop goes on. 0 when the change was aborted. */
static int join(void) {
    dynrt_rc rc;
    CALL(dynrt_rc_query(A.s, NULL, &rc));
    if (rc.type == DYNRT_RC_NULL || !rc.incl) {
        die(1, "started by %s, which does not need this process", dynrt_launch_delta(A.s));
    }
    dynrt_pset_ref set;
    int e = dynrt_confirm(A.s, rc.delta, 0, &set);
    if (e == DYNRT_ERR_ABORTED) {
        return 0;
    }
    CALL(e);
    load_set(&A.set, &set);
    char key[IDLEN];
    snprintf(key, sizeof key, "j:%s", rc.delta);
    void *v;
    CALL(dynrt_get(A.s, A.set.m[0], key, DYNRT_GET_WAIT, 60000, &v, NULL));
    if (sscanf(v, "%d %" SCNd64, &A.iter, &A.expected) != 2) {
        die(1, "cannot read the join message %s", (char *)v);
    }
    free(v);
    dynrt_rc_release(&rc);
    return 1;
}

static void usage(void) {
    fprintf(stderr, "usage: c-synthetic [-i iters] [-f freq] [--start N] [--limit N] [--delta N] [-b]\n"
                    "                   [--trigger app|external] [--changes K] [--problem-size N] [--timeout S]\n");
    exit(2);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    config c = {.iters = 20, .freq = 5, .problem = 20000000, .trigger = "app"};
    int timeout = 300;
    static struct option opts[] = {
        {"start", required_argument, 0, 1},   {"limit", required_argument, 0, 2},
        {"delta", required_argument, 0, 3},   {"trigger", required_argument, 0, 4},
        {"changes", required_argument, 0, 5}, {"problem-size", required_argument, 0, 6},
        {"timeout", required_argument, 0, 7}, {"test-skew", required_argument, 0, 8},
        {"test-hold", required_argument, 0, 9},  {"test-linger", required_argument, 0, 10},
        {0, 0, 0, 0},
    };
    for (int o; (o = getopt_long(argc, argv, "i:f:b", opts, NULL)) != -1;) {
        switch (o) {
        case 'i': c.iters = atoi(optarg); break;
        case 'f': c.freq = atoi(optarg); break;
        case 'b': c.blocking = 1; break;
        case 1: c.start = atoi(optarg); break;
        case 2: c.limit = atoi(optarg); break;
        case 3: c.delta = atoi(optarg); break;
        case 4: c.trigger = optarg; break;
        case 5: c.changes = atoi(optarg); break;
        case 6: c.problem = strtoll(optarg, NULL, 10); break;
        case 7: timeout = atoi(optarg); break;
        case 8: c.skew = atoi(optarg); break;
        case 9: c.hold = optarg; break;
        case 10: c.linger = atoi(optarg); break;
        default: usage();
        }
    }
    if (optind != argc || c.iters < 1 || c.freq < 1 || c.problem < 1 ||
        (strcmp(c.trigger, "app") != 0 && strcmp(c.trigger, "external") != 0)) {
        usage();
    }
    alarm((unsigned)timeout); /* the run's limit: SIGALRM ends a process that hangs */
    A.c = c;
    now(&A.t0);
    if (dynrt_init(&A.s) != DYNRT_OK) {
        fprintf(stderr, "c-synthetic: %s\n", dynrt_errmsg());
        return 1;
    }
    A.me = dynrt_rank(A.s);
    if (dynrt_launch_delta(A.s)[0]) {
        if (!join()) {
            dynrt_finalize(A.s);
            return 0; /* the change that started it was aborted */
        }
        A.c.skew = c.skew;
    } else {
        char app[DYNRT_NAME_MAX];
        CALL(dynrt_app_set(A.s, app, sizeof app));
        dynrt_pset_ref ref;
        CALL(dynrt_pset_ref_parse(app, &ref));
        dynrt_pset *p;
        CALL(dynrt_pset_info(A.s, app, &p));
        ref.version = p->version;
        dynrt_pset_free(p);
        load_set(&A.set, &ref);
        A.c.skew = 0; /* only the new processes lie, so the check must catch them */
        if (c.start > 0 && (int)A.set.n != c.start) {
            die(1, "--start %d, but the job runs %zu processes", c.start, A.set.n);
        }
        A.next_due = c.freq - 1;
    }
    if (A.c.limit == 0) {
        A.c.limit = (int)A.set.n;
    }
    while (iterate()) {
    }
    if (A.me == A.set.m[0]) {
        report_end();
    }
    free(A.set.m);
    CALL(dynrt_finalize(A.s));
    return 0;
}
