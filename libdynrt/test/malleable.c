/* malleable.c: the C twin of internal/malleable (Go, lib/session) for the
 * mixed-language job of TestMixed: it adapts to every resource change bound
 * to its set in the same way (the root of the bound set does phase 2 as a
 * new version of the set; every member accepts in the member form; new
 * processes confirm) and prints the same lines, with "impl":"c":
 *
 *   CONFIRMED {rank, delta, set, version}   a new process confirmed
 *   STATE     {rank, delta, status, set, version}  a change it took part in ended
 *   LEFT      {rank, delta}                 a SUB or REPLACE removed it (exit 0)
 *   DONE      {rank, set, version, last}    change number -last has ended
 *   ERROR     {rank, err}                   a check failed (exit 1)
 *
 * Flags as internal/malleable's: -last N, -blocking, -quiet (accepted; the
 * lines are always the short ones), and -bench query|lookup|psetop -n N:
 * rank 0 times N calls (after 20 to warm up) and prints BENCH {op, n, mean,
 * median, p90} in ns, as the Go program does, for scripts/bench-libdynrt.sh.
 * It waits for rc.* events, never polls. */
#include <dynrt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static dynrt_session *S;
static uint32_t me;

#define CALL(x)                                                                                                        \
    do {                                                                                                               \
        if ((x) != DYNRT_OK) {                                                                                         \
            printf("ERROR {\"rank\":%u,\"impl\":\"c\",\"err\":\"%s: %s\"}\n", me, #x, dynrt_errmsg());                 \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Waits for the next rc.* event (or a second, as a safety net). */
static void wait_event(void) {
    dynrt_event *ev;
    int e = dynrt_event_poll(S, 1000, &ev);
    if (e == DYNRT_OK) {
        dynrt_event_free(ev);
    } else if (e != DYNRT_ERR_TIMEOUT) {
        CALL(e);
    }
}

/* Waits until the change is no longer PENDING; returns its status. */
static dynrt_rc_status settled(const char *delta) {
    dynrt_rc now;
    CALL(dynrt_rc_get(S, delta, &now));
    while (now.status == DYNRT_RC_PENDING) {
        dynrt_rc_release(&now);
        wait_event();
        CALL(dynrt_rc_get(S, delta, &now));
    }
    dynrt_rc_status st = now.status;
    dynrt_rc_release(&now);
    return st;
}

/* The set it continues with, as internal/malleable prints it (without the
 * job data, which only lib/session's program prints). */
static void state(const char *delta, dynrt_rc_status st, const dynrt_pset_ref *set) {
    printf("STATE {\"rank\":%u,\"impl\":\"c\",\"delta\":\"%s\",\"status\":\"%s\",\"set\":\"%s\",\"version\":%u}\n", me,
           delta, dynrt_rc_status_name(st), set->name, set->version);
}

/* Phases 2 and 3 of one change for the set main; returns 1 if this process
 * left. */
static int adapt(dynrt_rc *rc, dynrt_pset_ref *main) {
    dynrt_pset_ref *ref = NULL;
    for (size_t i = 0; i < rc->nbound; i++) {
        if (strcmp(rc->bound[i].name, main->name) == 0) {
            ref = &rc->bound[i];
        }
    }
    if (ref == NULL) {
        printf("ERROR {\"rank\":%u,\"impl\":\"c\",\"err\":\"%s is not bound to %s\"}\n", me, rc->delta, main->name);
        exit(1);
    }
    char name[DYNRT_NAME_MAX + 16];
    CALL(dynrt_pset_ref_format(ref, name, sizeof name));
    dynrt_pset *members;
    CALL(dynrt_pset_info(S, name, &members));
    int root = members->members[0] == me;
    dynrt_pset_free(members);
    const char *newset = NULL;
    dynrt_pset_result r;
    if (root) {
        /* ADD: UNION; SUB: DIFFERENCE; REPLACE: UNION, then DIFFERENCE
         * with the replaced set; each a new version of the set. */
        dynrt_op op = rc->type == DYNRT_RC_SUB ? DYNRT_DIFFERENCE : DYNRT_UNION;
        int e = dynrt_pset_op(S, op, main->name, rc->delta, main->name, &r);
        if (e == DYNRT_OK && rc->type == DYNRT_RC_REPLACE) {
            e = dynrt_pset_op(S, DYNRT_DIFFERENCE, main->name, rc->out_set, main->name, &r);
        }
        if (e == DYNRT_OK) {
            newset = r.set.name;
        } else if (e != DYNRT_ERR_ABORTED) {
            CALL(e);
        }
    }
    dynrt_accept_opts o = {.bound = main->name, .blocking = getenv("MALLEABLE_BLOCKING") != NULL};
    dynrt_accept_result res;
    int e = dynrt_accept(S, rc->delta, newset, &o, &res);
    while (e == DYNRT_OK && res.status == DYNRT_RC_PENDING && rc->type != DYNRT_RC_SUB) {
        /* Wait for the confirmation (or the abort), then ask again. */
        settled(rc->delta);
        e = dynrt_accept(S, rc->delta, newset, &o, &res);
    }
    if (e == DYNRT_ERR_ABORTED) {
        state(rc->delta, DYNRT_RC_ABORTED, main);
        return 0;
    }
    CALL(e);
    if (res.terminate) {
        printf("LEFT {\"rank\":%u,\"impl\":\"c\",\"delta\":\"%s\"}\n", me, rc->delta);
        CALL(dynrt_finalize(S));
        return 1;
    }
    if (res.set.name[0]) {
        *main = res.set;
    }
    if (rc->type == DYNRT_RC_SUB && res.status == DYNRT_RC_PENDING) {
        res.status = settled(rc->delta); /* other bound sets still have to accept */
    }
    state(rc->delta, res.status, main);
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One call of the benchmarked kind, the same calls as the Go program's. */
static int bench_call(const char *op, int i, const char *app, const char *target) {
    if (strcmp(op, "query") == 0) {
        dynrt_rc rc;
        int e = dynrt_rc_query(S, NULL, &rc);
        dynrt_rc_release(&rc);
        return e;
    }
    if (strcmp(op, "lookup") == 0) {
        void *v;
        int e = dynrt_lookup(S, "bench-key", DYNRT_RANGE_JOB, 0, 0, &v, NULL);
        if (e == DYNRT_OK) {
            free(v);
        }
        return e;
    }
    if (i % 2 == 0) {
        return dynrt_pset_op(S, DYNRT_UNION, app, app, target, NULL);
    }
    return dynrt_pset_op(S, DYNRT_DIFFERENCE, app, DYNRT_SELF, target, NULL);
}

static void bench(const char *op, int n) {
    if (strcmp(op, "query") != 0 && strcmp(op, "lookup") != 0 && strcmp(op, "psetop") != 0) {
        fprintf(stderr, "malleable: unknown benchmark %s (query, lookup or psetop)\n", op);
        exit(2);
    }
    if (me == 0) {
        char app[DYNRT_NAME_MAX], target[DYNRT_NAME_MAX + 8];
        CALL(dynrt_app_set(S, app, sizeof app));
        snprintf(target, sizeof target, "%s/bench", app);
        if (strcmp(op, "lookup") == 0) {
            CALL(dynrt_publish(S, "bench-key", "v", 1, DYNRT_RANGE_JOB));
        }
        for (int i = 0; i < 20; i++) {
            CALL(bench_call(op, i, app, target));
        }
        int64_t *t = calloc((size_t)n, sizeof *t), total = 0;
        for (int i = 0; i < n; i++) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            CALL(bench_call(op, i, app, target));
            clock_gettime(CLOCK_MONOTONIC, &b);
            t[i] = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
            total += t[i];
        }
        qsort(t, (size_t)n, sizeof *t, cmp_i64);
        printf("BENCH {\"impl\":\"c\",\"op\":\"%s\",\"n\":%d,\"mean\":%lld,\"median\":%lld,\"p90\":%lld}\n", op, n,
               (long long)(total / n), (long long)t[n / 2], (long long)t[n * 9 / 10]);
        free(t);
    }
    CALL(dynrt_fence(S, NULL, 0, NULL, 0, 0));
    CALL(dynrt_finalize(S));
    exit(0);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    int last = 0, calls = 1000;
    const char *benchop = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-bench") == 0 && i + 1 < argc) {
            benchop = argv[++i];
        } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            calls = atoi(argv[++i]);
        } else if ((strcmp(argv[i], "-last") == 0 || strcmp(argv[i], "--last") == 0) && i + 1 < argc) {
            last = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-blocking") == 0) {
            setenv("MALLEABLE_BLOCKING", "1", 1);
        } else if (strcmp(argv[i], "-quiet") != 0) {
            fprintf(stderr, "malleable: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    CALL(dynrt_init(&S));
    me = dynrt_rank(S);
    if (benchop != NULL) {
        bench(benchop, calls > 0 ? calls : 1);
    }
    const char *kinds[] = {"rc."};
    CALL(dynrt_subscribe(S, kinds, 1, NULL, NULL, NULL));
    dynrt_pset_ref main = {0};
    CALL(dynrt_app_set(S, main.name, sizeof main.name));
    dynrt_rc rc;
    CALL(dynrt_rc_query(S, DYNRT_SELF, &rc));
    if (rc.incl && (rc.type == DYNRT_RC_ADD || rc.type == DYNRT_RC_REPLACE)) {
        CALL(dynrt_confirm(S, rc.delta, 0, &main));
        printf("CONFIRMED {\"rank\":%u,\"impl\":\"c\",\"delta\":\"%s\",\"set\":\"%s\",\"version\":%u}\n", me, rc.delta,
               main.name, main.version);
        state(rc.delta, DYNRT_RC_FINALIZED, &main);
    }
    dynrt_rc_release(&rc);
    char lastdelta[DYNRT_NAME_MAX];
    snprintf(lastdelta, sizeof lastdelta, "mpi://rte/%s/rc/%d", dynrt_app(S), last);
    for (;;) {
        /* The change bound to the set that still needs this process. */
        CALL(dynrt_rc_query(S, main.name, &rc));
        if (rc.type != DYNRT_RC_NULL) {
            int left = adapt(&rc, &main);
            dynrt_rc_release(&rc);
            if (left) {
                return 0;
            }
            continue;
        }
        if (last > 0) {
            int e = dynrt_rc_get(S, lastdelta, &rc);
            if (e != DYNRT_ERR_NOT_FOUND) {
                CALL(e);
                dynrt_rc_status st = rc.status;
                dynrt_rc_release(&rc);
                if (st == DYNRT_RC_FINALIZED || st == DYNRT_RC_ABORTED) {
                    printf("DONE {\"rank\":%u,\"impl\":\"c\",\"set\":\"%s\",\"version\":%u,\"last\":\"%s\"}\n", me,
                           main.name, main.version, dynrt_rc_status_name(st));
                    CALL(dynrt_finalize(S));
                    return 0;
                }
            }
        }
        wait_event();
    }
}
