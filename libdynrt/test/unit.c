/* unit.c: libdynrt's unit test program, run as a job of 3 processes by
 * TestUnit (libdynrt_test.go) on a real DVM of 2 nodes x 2 slots. It calls
 * every function of dynrt.h and checks the answers; every step that passes
 * prints "ok <step>", a failure prints "FAIL ..." on stderr and exits 1.
 * The job grows by one process (ADD, accepted with dynrt_iaccept and
 * dynrt_test) and shrinks by it again (SUB, dynrt_accept). */
#include <dynrt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static dynrt_session *S;
static uint32_t me;

#define FAILF(...)                                                                                                     \
    do {                                                                                                               \
        fprintf(stderr, "FAIL rank %u line %d: ", me, __LINE__);                                                    \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fprintf(stderr, "\n");                                                                                         \
        exit(1);                                                                                                       \
    } while (0)

/* CALL: the call must succeed. */
#define CALL(x)                                                                                                        \
    do {                                                                                                               \
        int rc_ = (x);                                                                                                 \
        if (rc_ != DYNRT_OK) {                                                                                         \
            FAILF("%s: %s (%s): %s", #x, dynrt_strerror(rc_), dynrt_code_name(rc_), dynrt_errmsg());                   \
        }                                                                                                              \
    } while (0)

/* WANT: the call must fail with code. */
#define WANT(code, x)                                                                                                  \
    do {                                                                                                               \
        int rc_ = (x);                                                                                                 \
        if (rc_ != (code)) {                                                                                           \
            FAILF("%s: got %s, want %s: %s", #x, dynrt_strerror(rc_), dynrt_strerror(code), dynrt_errmsg());           \
        }                                                                                                              \
        if (dynrt_errmsg()[0] == 0) {                                                                                  \
            FAILF("%s: no error message", #x);                                                                         \
        }                                                                                                              \
    } while (0)

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            FAILF(__VA_ARGS__);                                                                                        \
        }                                                                                                              \
    } while (0)

static void ok(const char *step) {
    printf("ok %s\n", step);
    fflush(stdout);
}

static void msleep(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static char appset[DYNRT_NAME_MAX];

static void fence_all(const char *id, const uint32_t *ranks, size_t n) {
    CALL(dynrt_fence(S, ranks, n, id, 0, 20000));
}

static void identity(void) {
    CHECK(strcmp(dynrt_job(S), getenv("DYNRT_JOB")) == 0, "job %s, env %s", dynrt_job(S), getenv("DYNRT_JOB"));
    CHECK(dynrt_rank(S) == (uint32_t)atoi(getenv("DYNRT_RANK")), "rank %u", dynrt_rank(S));
    CHECK(dynrt_size(S) == 3, "size %u, want 3", dynrt_size(S));
    CHECK(dynrt_app(S)[0] && dynrt_node(S)[0] && dynrt_dvm(S)[0], "empty app, node or dvm");
    CHECK(dynrt_uid(S) == strtoull(getenv("DYNRT_UID"), NULL, 10), "uid %llu, env %s",
          (unsigned long long)dynrt_uid(S), getenv("DYNRT_UID"));
    CHECK(dynrt_launch_delta(S)[0] == 0, "launched with the job but delta %s", dynrt_launch_delta(S));
    uint32_t n;
    CALL(dynrt_job_size(S, &n));
    CHECK(n == 3, "job size %u", n);
    CALL(dynrt_app_set(S, appset, sizeof appset));
    char small[4];
    WANT(DYNRT_ERR_TOO_LARGE, dynrt_app_set(S, small, sizeof small));
    ok("identity");
}

static void psets(void) {
    int n;
    CALL(dynrt_pset_count(S, &n));
    CHECK(n >= 4, "%d sets", n);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        char name[DYNRT_NAME_MAX];
        CALL(dynrt_pset_name(S, i, name, sizeof name));
        seen += strcmp(name, DYNRT_WORLD) == 0 || strcmp(name, DYNRT_SELF) == 0 || strcmp(name, DYNRT_SHARED) == 0 ||
                strcmp(name, appset) == 0;
    }
    CHECK(seen == 4, "WORLD, SELF, SHARED and %s: %d of them listed", appset, seen);
    char name[DYNRT_NAME_MAX];
    WANT(DYNRT_ERR_INVALID, dynrt_pset_name(S, n, name, sizeof name));
    dynrt_pset *w;
    CALL(dynrt_pset_info(S, DYNRT_WORLD, &w));
    CHECK(w->size == 3 && w->members[0] == 0 && w->members[2] == 2, "WORLD: size %u", w->size);
    CHECK(dynrt_pset_contains(w, me) && !dynrt_pset_contains(w, 7), "WORLD membership");
    CHECK(strcmp(w->job, dynrt_job(S)) == 0, "WORLD of job %s", w->job);
    dynrt_pset_free(w);
    WANT(DYNRT_ERR_NOT_FOUND, dynrt_pset_info(S, "mpi://app/nosuchapp/x", &w));
    char buf[600];
    CHECK(dynrt_last_error(S, buf, sizeof buf) == DYNRT_ERR_NOT_FOUND && strstr(buf, "pset.get") != NULL,
          "last error %s", buf);
    dynrt_pset_ref ref;
    CALL(dynrt_pset_ref_parse("mpi://app/x@12", &ref));
    CHECK(strcmp(ref.name, "mpi://app/x") == 0 && ref.version == 12, "parse: %s %u", ref.name, ref.version);
    CALL(dynrt_pset_ref_format(&ref, buf, sizeof buf));
    CHECK(strcmp(buf, "mpi://app/x@12") == 0, "format: %s", buf);
    WANT(DYNRT_ERR_INVALID, dynrt_pset_ref_parse("mpi://app/x@v", &ref));
    ok("psets");
}

static void kv(void) {
    char v[32];
    snprintf(v, sizeof v, "value of %u", me);
    CALL(dynrt_put(S, "k", v, strlen(v)));
    CALL(dynrt_put(S, "empty", NULL, 0));
    CALL(dynrt_commit(S));
    fence_all(NULL, NULL, 0);
    for (uint32_t r = 0; r < 3; r++) {
        void *got;
        size_t len;
        CALL(dynrt_get(S, r, "k", 0, 0, &got, &len));
        snprintf(v, sizeof v, "value of %u", r);
        CHECK(len == strlen(v) && memcmp(got, v, len) == 0, "get k of %u: %.*s", r, (int)len, (char *)got);
        free(got);
        CALL(dynrt_get(S, r, "empty", DYNRT_GET_REFRESH, 0, &got, &len));
        CHECK(len == 0, "empty value of %u has %zu bytes", r, len);
        free(got);
    }
    void *got;
    size_t len;
    WANT(DYNRT_ERR_NOT_FOUND, dynrt_get(S, (me + 1) % 3, "never", 0, 0, &got, &len));
    WANT(DYNRT_ERR_TIMEOUT, dynrt_get(S, (me + 1) % 3, "never", DYNRT_GET_WAIT, 200, &got, &len));
    /* A get with wait for a value committed later. */
    if (me == 2) {
        msleep(100);
        CALL(dynrt_put(S, "late", "L", 1));
        CALL(dynrt_commit(S));
    } else {
        CALL(dynrt_get(S, 2, "late", DYNRT_GET_WAIT, 10000, &got, &len));
        CHECK(len == 1 && ((char *)got)[0] == 'L', "late value");
        free(got);
    }
    uint32_t all[] = {2, 0, 1};
    fence_all("kv-named", all, 3);
    fence_all("kv-collect", all, 3);
    CALL(dynrt_fence(S, all, 3, "kv-collect2", 1, 10000));
    WANT(DYNRT_ERR_INVALID, dynrt_fence(S, all, 0, NULL, 0, 0));
    ok("kv");
}

static void pubsub(void) {
    if (me == 1) {
        msleep(100);
        CALL(dynrt_publish(S, "pub1", "P1", 2, DYNRT_RANGE_JOB));
        WANT(DYNRT_ERR_EXISTS, dynrt_publish(S, "pub1", "again", 5, DYNRT_RANGE_JOB));
        CALL(dynrt_publish(S, "pubdvm", "D", 1, DYNRT_RANGE_DVM));
    } else {
        void *v;
        size_t len;
        CALL(dynrt_lookup(S, "pub1", DYNRT_RANGE_JOB, 1, 10000, &v, &len));
        CHECK(len == 2 && memcmp(v, "P1", 2) == 0, "lookup pub1");
        free(v);
        CALL(dynrt_lookup(S, "pubdvm", DYNRT_RANGE_DVM, 1, 10000, &v, &len));
        CHECK(len == 1 && memcmp(v, "D", 1) == 0, "lookup pubdvm");
        free(v);
        WANT(DYNRT_ERR_NOT_FOUND, dynrt_lookup(S, "nokey", DYNRT_RANGE_JOB, 0, 0, &v, &len));
        WANT(DYNRT_ERR_TIMEOUT, dynrt_lookup(S, "nokey", DYNRT_RANGE_JOB, 1, 200, &v, &len));
    }
    fence_all("pub", NULL, 0);
    if (me == 1) {
        CALL(dynrt_unpublish(S, "pub1", DYNRT_RANGE_JOB));
        CALL(dynrt_unpublish(S, NULL, DYNRT_RANGE_DVM));
    }
    fence_all("unpub", NULL, 0);
    void *v;
    size_t len;
    WANT(DYNRT_ERR_NOT_FOUND, dynrt_lookup(S, "pub1", DYNRT_RANGE_JOB, 0, 0, &v, &len));
    WANT(DYNRT_ERR_NOT_FOUND, dynrt_lookup(S, "pubdvm", DYNRT_RANGE_DVM, 0, 0, &v, &len));
    ok("pubsub");
}

static atomic_int app_events;

static void on_app(dynrt_session *s, const dynrt_event *ev, void *arg) {
    (void)arg;
    if (strcmp(ev->kind, "app") != 0 || ev->src_rank != 1 || ev->ndata != 1 ||
        strcmp(ev->data_keys[0], "x") != 0 || strcmp(ev->data_values[0], "y") != 0) {
        fprintf(stderr, "FAIL rank %u: app event %s from %u with %zu data\n", me, ev->kind, ev->src_rank, ev->ndata);
        exit(1);
    }
    /* A callback may call the session. */
    uint32_t n;
    if (dynrt_job_size(s, &n) != DYNRT_OK) {
        fprintf(stderr, "FAIL rank %u: call from the callback: %s\n", me, dynrt_errmsg());
        exit(1);
    }
    atomic_fetch_add(&app_events, 1);
}

/* Waits for a pset.def event of name on the poll queue. */
static void wait_def(const char *name) {
    for (int i = 0; i < 100; i++) {
        dynrt_event *ev;
        int rc = dynrt_event_poll(S, 100, &ev);
        if (rc == DYNRT_ERR_TIMEOUT) {
            continue;
        }
        CALL(rc);
        int hit = strcmp(ev->kind, "pset.def") == 0 && strcmp(ev->pset.name, name) == 0;
        dynrt_event_free(ev);
        if (hit) {
            return;
        }
    }
    FAILF("no pset.def event of %s", name);
}

static void setops(void) {
    const char *kinds[] = {"pset."};
    uint64_t sub, cb;
    CALL(dynrt_subscribe(S, kinds, 1, NULL, NULL, &sub));
    const char *appk[] = {"app"};
    CALL(dynrt_subscribe(S, appk, 1, on_app, NULL, &cb));
    dynrt_event *ev;
    WANT(DYNRT_ERR_TIMEOUT, dynrt_event_poll(S, 0, &ev));
    fence_all("ops", NULL, 0);
    char u[DYNRT_NAME_MAX + 8], half[DYNRT_NAME_MAX + 8], part0[DYNRT_NAME_MAX + 16];
    snprintf(u, sizeof u, "%s/u", appset);
    snprintf(half, sizeof half, "%s/half", appset);
    snprintf(part0, sizeof part0, "%s/0", half);
    if (me == 0) {
        dynrt_pset_result r;
        CALL(dynrt_pset_op(S, DYNRT_UNION, appset, DYNRT_WORLD, u, &r));
        CHECK(strcmp(r.set.name, u) == 0 && r.size == 3, "union: %s size %u", r.set.name, r.size);
        dynrt_split_opts so = {.parts = 2, .target = half};
        dynrt_pset_result *parts;
        size_t np;
        CALL(dynrt_pset_split(S, DYNRT_WORLD, &so, &parts, &np));
        CHECK(np == 2 && parts[0].size == 2 && parts[1].size == 1 && strcmp(parts[0].set.name, part0) == 0,
              "split in 2: %zu parts, %s", np, np > 0 ? parts[0].set.name : "");
        free(parts);
        CALL(dynrt_pset_op(S, DYNRT_DIFFERENCE, DYNRT_WORLD, part0, NULL, &r));
        CHECK(r.size == 1, "difference: size %u", r.size);
        CALL(dynrt_pset_op(S, DYNRT_INTERSECTION, DYNRT_WORLD, part0, NULL, &r));
        CHECK(r.size == 2, "intersection: size %u", r.size);
        dynrt_split_opts bn = {.by_node = 1};
        CALL(dynrt_pset_split(S, DYNRT_WORLD, &bn, &parts, &np));
        CHECK(np == 2 && parts[0].size + parts[1].size == 3, "split by node: %zu parts", np);
        free(parts);
        uint32_t a[] = {0, 2}, b[] = {1};
        const uint32_t *lists[] = {a, b};
        size_t sizes[] = {2, 1};
        dynrt_split_opts rl = {.nlists = 2, .lists = lists, .list_sizes = sizes};
        CALL(dynrt_pset_split(S, DYNRT_WORLD, &rl, &parts, &np));
        CHECK(np == 2 && parts[0].size == 2 && parts[1].size == 1, "split by ranks: %zu parts", np);
        free(parts);
        dynrt_split_opts two = {.parts = 2, .by_node = 1};
        WANT(DYNRT_ERR_INVALID, dynrt_pset_split(S, DYNRT_WORLD, &two, &parts, &np));
        WANT(DYNRT_ERR_NOT_FOUND, dynrt_pset_op(S, DYNRT_UNION, "mpi://app/nosuch/x", DYNRT_WORLD, NULL, &r));
        WANT(DYNRT_ERR_INVALID, dynrt_pset_op(S, (dynrt_op)42, DYNRT_WORLD, DYNRT_WORLD, NULL, &r));
    }
    wait_def(u);
    fence_all("ops-seen", NULL, 0);
    dynrt_pset *p;
    CALL(dynrt_pset_info(S, part0, &p));
    CHECK(p->size == 2 && p->members[0] == 0 && p->members[1] == 1, "%s: size %u", part0, p->size);
    dynrt_pset_free(p);
    if (me == 1) {
        const char *k[] = {"x"}, *v[] = {"y"};
        CALL(dynrt_notify(S, "hello", k, v, 1));
    }
    for (int i = 0; i < 100 && atomic_load(&app_events) == 0; i++) {
        msleep(50);
    }
    CHECK(atomic_load(&app_events) == 1, "%d app events, want 1", atomic_load(&app_events));
    fence_all("ops-notified", NULL, 0);
    if (me == 0) {
        CALL(dynrt_pset_delete(S, u));
    }
    fence_all("ops-deleted", NULL, 0);
    WANT(DYNRT_ERR_NOT_FOUND, dynrt_pset_info(S, u, &p));
    CALL(dynrt_unsubscribe(S, sub));
    CALL(dynrt_unsubscribe(S, 0));
    ok("setops");
}

static void *hammer(void *arg) {
    (void)arg;
    for (int i = 0; i < 50; i++) {
        dynrt_pset *p;
        if (dynrt_pset_info(S, DYNRT_WORLD, &p) != DYNRT_OK || p->size != 3) {
            fprintf(stderr, "FAIL rank %u: concurrent pset info: %s\n", me, dynrt_errmsg());
            exit(1);
        }
        dynrt_pset_free(p);
        void *v;
        size_t len;
        if (dynrt_get(S, (me + 1) % 3, "k", 0, 0, &v, &len) != DYNRT_OK) {
            fprintf(stderr, "FAIL rank %u: concurrent get: %s\n", me, dynrt_errmsg());
            exit(1);
        }
        free(v);
    }
    return NULL;
}

static void threads(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[i], NULL, hammer, NULL);
    }
    /* A fence blocks this thread only: the others go on meanwhile. */
    fence_all("threads", NULL, 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    ok("threads");
}

/* Waits until the daemon has the change the root asked for. */
static void wait_change(const char *bound, dynrt_rc *rc) {
    for (int i = 0; i < 200; i++) {
        CALL(dynrt_rc_query(S, bound, rc));
        if (rc->type != DYNRT_RC_NULL) {
            return;
        }
        msleep(50);
    }
    FAILF("no change announced");
}

static void continue_with(dynrt_pset_ref set);
static void cancel(void);

static void grow_and_shrink(void) {
    dynrt_rc rc;
    CALL(dynrt_rc_query(S, NULL, &rc));
    CHECK(rc.type == DYNRT_RC_NULL && rc.status == DYNRT_RC_STATUS_NULL, "a change before any was asked for: %s",
          rc.delta);
    dynrt_accept_result res;
    WANT(DYNRT_ERR_NOT_FOUND, dynrt_accept(S, "mpi://rte/nosuch/rc/9", NULL, NULL, &res));
    fence_all("rc0", NULL, 0);
    char delta[DYNRT_NAME_MAX];
    if (me == 0) {
        dynrt_rc req;
        CALL(dynrt_rc_request(S, DYNRT_RC_ADD, 1, NULL, &req));
        CHECK(req.type == DYNRT_RC_ADD && req.n == 1, "request: %s %u", dynrt_rc_type_name(req.type), req.n);
        WANT(DYNRT_ERR_BUSY, dynrt_rc_request(S, DYNRT_RC_ADD, 1, NULL, NULL));
        dynrt_rc_release(&req);
    }
    wait_change(NULL, &rc);
    CHECK(rc.type == DYNRT_RC_ADD && rc.nranks == 1 && rc.ranks[0] == 3 && !rc.incl && rc.nbound == 1 &&
              strcmp(rc.requester, "app") == 0,
          "change: %s of %zu ranks, incl %d, requester %s", dynrt_rc_type_name(rc.type), rc.nranks, rc.incl,
          rc.requester);
    snprintf(delta, sizeof delta, "%s", rc.delta);
    dynrt_rc_release(&rc);
    dynrt_pset_result grown = {0};
    if (me == 0) {
        CALL(dynrt_pset_op(S, DYNRT_UNION, appset, delta, NULL, &grown));
        CHECK(grown.size == 4, "grown set of %u", grown.size);
    }
    WANT(DYNRT_ERR_PERMISSION, dynrt_confirm(S, delta, 1000, &res.set));
    dynrt_accept_opts ao = {.blocking = 1, .timeout_ms = 30000};
    dynrt_request *r;
    CALL(dynrt_iaccept(S, delta, me == 0 ? grown.set.name : NULL, &ao, &r));
    int done = 0, polls = 0;
    while (!done) {
        CALL(dynrt_test(&r, &done, &res));
        if (!done) {
            polls++;
            msleep(5);
        }
    }
    CHECK(r == NULL, "request not freed");
    CHECK(res.status == DYNRT_RC_FINALIZED && !res.terminate, "accept: %s, terminate %d",
          dynrt_rc_status_name(res.status), res.terminate);
    CALL(dynrt_rc_query(S, NULL, &rc));
    CHECK(rc.type == DYNRT_RC_NULL, "the finished ADD is still reported: %s %s", rc.delta,
          dynrt_rc_status_name(rc.status));
    printf("ok add set=%s@%u polls=%d\n", res.set.name, res.set.version, polls);
    fflush(stdout);
    continue_with(res.set);
}

/* Both the old processes and the new one go on here with the grown set. */
static void continue_with(dynrt_pset_ref set) {
    char name[DYNRT_NAME_MAX + 16];
    CALL(dynrt_pset_ref_format(&set, name, sizeof name));
    dynrt_pset *p;
    CALL(dynrt_pset_info(S, name, &p));
    CHECK(p->size == 4 && dynrt_pset_contains(p, me), "%s: size %u", name, p->size);
    fence_all("grown", p->members, p->size);
    dynrt_pset_free(p);
    ok("grown");
    if (me == 0) {
        uint32_t leave[] = {3};
        dynrt_rc_request_opts o = {.ranks = leave, .nranks = 1};
        CALL(dynrt_rc_request(S, DYNRT_RC_SUB, 0, &o, NULL));
    }
    dynrt_rc rc;
    wait_change(NULL, &rc);
    CHECK(rc.type == DYNRT_RC_SUB && rc.nranks == 1 && rc.ranks[0] == 3 && rc.incl == (me == 3),
          "change: %s of %zu ranks, incl %d", dynrt_rc_type_name(rc.type), rc.nranks, rc.incl);
    char delta[DYNRT_NAME_MAX];
    snprintf(delta, sizeof delta, "%s", rc.delta);
    dynrt_rc_release(&rc);
    dynrt_pset_result shrunk = {0};
    if (me == 0) {
        CALL(dynrt_pset_op(S, DYNRT_DIFFERENCE, set.name, delta, NULL, &shrunk));
        CHECK(shrunk.size == 3, "shrunk set of %u", shrunk.size);
    }
    dynrt_accept_result res;
    CALL(dynrt_accept(S, delta, me == 0 ? shrunk.set.name : NULL, NULL, &res));
    CHECK(res.terminate == (me == 3), "terminate %d", res.terminate);
    CHECK(res.status == DYNRT_RC_PENDING || res.status == DYNRT_RC_FINALIZED, "SUB accepted: %s",
          dynrt_rc_status_name(res.status));
    CALL(dynrt_rc_query(S, NULL, &rc));
    CHECK(rc.type == DYNRT_RC_NULL, "the accepted SUB is still reported: %s", dynrt_rc_status_name(rc.status));
    if (res.terminate) {
        ok("leave");
        CALL(dynrt_finalize(S));
        exit(0);
    }
    CALL(dynrt_pset_info(S, shrunk.set.name[0] ? shrunk.set.name : appset, &p));
    fence_all("shrunk", (uint32_t[]){0, 1, 2}, 3);
    dynrt_pset_free(p);
    ok("shrunk");
    if (me == 0) {
        cancel();
    }
    /* Nobody leaves before the canceled change has ended. */
    fence_all("canceled", (uint32_t[]){0, 1, 2}, 3);
    CALL(dynrt_finalize(S));
    ok("done");
    exit(0);
}

/* An ADD canceled by the application itself before it is accepted. */
static void cancel(void) {
    dynrt_rc req;
    /* The SUB is in flight until its process has left: ask again while busy
       (a queued request would be answered at once, before it has a delta). */
    int busy = dynrt_rc_request(S, DYNRT_RC_ADD, 1, NULL, &req);
    for (int i = 0; i < 500 && busy == DYNRT_ERR_BUSY; i++) {
        msleep(20);
        busy = dynrt_rc_request(S, DYNRT_RC_ADD, 1, NULL, &req);
    }
    CALL(busy);
    CALL(dynrt_rc_cancel(S, req.delta, NULL));
    dynrt_rc rc;
    CALL(dynrt_rc_get(S, req.delta, &rc));
    for (int i = 0; i < 100 && rc.status != DYNRT_RC_ABORTED; i++) {
        dynrt_rc_release(&rc);
        msleep(20);
        CALL(dynrt_rc_get(S, req.delta, &rc));
    }
    CHECK(rc.status == DYNRT_RC_ABORTED && strstr(rc.reason, "canceled by rank 0") != NULL, "canceled: %s (%s)",
          dynrt_rc_status_name(rc.status), rc.reason);
    dynrt_rc_release(&rc);
    WANT(DYNRT_ERR_BAD_STATE, dynrt_rc_cancel(S, req.delta, "again"));
    WANT(DYNRT_ERR_NOT_FOUND, dynrt_rc_cancel(S, "mpi://rte/nosuch/rc/3", "no such"));
    /* An abort is reported once (the thesis's MPI_RC_NULL after that). */
    CALL(dynrt_rc_query(S, NULL, &rc));
    CHECK(rc.status == DYNRT_RC_ABORTED && strcmp(rc.delta, req.delta) == 0, "the canceled ADD: %s %s, want ABORTED %s",
          dynrt_rc_status_name(rc.status), rc.delta, req.delta);
    dynrt_rc_release(&rc);
    CALL(dynrt_rc_query(S, NULL, &rc));
    CHECK(rc.type == DYNRT_RC_NULL, "the canceled ADD is reported again");
    dynrt_rc_release(&req);
    ok("cancel");
}

static void newcomer(void) {
    dynrt_rc rc;
    CALL(dynrt_rc_query(S, DYNRT_SELF, &rc));
    CHECK(rc.type == DYNRT_RC_ADD && rc.incl && strcmp(rc.delta, dynrt_launch_delta(S)) == 0,
          "new process: change %s %s incl %d", dynrt_rc_type_name(rc.type), rc.delta, rc.incl);
    dynrt_request *r;
    CALL(dynrt_iconfirm(S, rc.delta, 30000, &r));
    dynrt_accept_result res;
    int e = dynrt_wait(&r, &res);
    if (e == DYNRT_ERR_ABORTED) {
        ok("aborted"); /* the ADD the application canceled */
        dynrt_finalize(S);
        exit(0);
    }
    CALL(e);
    CHECK(res.status == DYNRT_RC_FINALIZED && res.set.name[0], "confirm: %s", dynrt_rc_status_name(res.status));
    dynrt_rc_release(&rc);
    CALL(dynrt_rc_query(S, DYNRT_SELF, &rc));
    CHECK(rc.type == DYNRT_RC_NULL, "the confirmed ADD is still reported");
    ok("confirm");
    CALL(dynrt_app_set(S, appset, sizeof appset));
    continue_with(res.set);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    dynrt_session *none = NULL;
    if (getenv("UNIT_NO_RUNTIME") != NULL) {
        int rc = dynrt_init(&none);
        printf("init: %s: %s\n", dynrt_code_name(rc), dynrt_errmsg());
        return rc == DYNRT_ERR_NO_RUNTIME && none == NULL ? 0 : 1;
    }
    CALL(dynrt_init(&S));
    me = dynrt_rank(S);
    if (dynrt_launch_delta(S)[0]) {
        newcomer();
    }
    identity();
    psets();
    kv();
    pubsub();
    setops();
    threads();
    grow_and_shrink();
    return 0;
}
