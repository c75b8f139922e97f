/* spawn_bench: the MPI-2 side of scripts/bench-spawn.sh (seed 003, sections
 * 5.1 and 5.2), built with Open MPI's mpicc and run as a 1-process job.
 *
 *   spawn_bench KS ROUNDS WARMUP RATE_N [LABEL]
 *
 * Latency: for every k in the comma list KS, WARMUP uncounted and ROUNDS
 * counted rounds of: MPI_Comm_spawn(k copies of this program) + MPI_Barrier
 * over the intercommunicator, timed at the parent. After the clock stops the
 * children send their PIDs, everybody disconnects, the children exit and
 * the parent waits until they are gone, so that no round pays for the
 * previous one's teardown.
 *
 * Rate: RATE_N spawns of 1 child back to back, each with its barrier; the
 * children stay (asleep, polling a non-blocking barrier every 2 ms) until
 * the last spawn is done, as in the seed's spawn-rate benchmark.
 *
 * KS "-" skips the latency rounds. Output, one line each, the same shape as
 * examples/spawnbench's (impl is LABEL, default "ompi"):
 *   ROUND {"impl":"ompi","k":K,"round":R,"ns":NS}
 *   RATE {"impl":"ompi","n":N,"ns":NS}
 *   HANG {"impl":"ompi","k":K,"round":R}    (k 0: in the rate run)
 * The last one comes from a watchdog: Open MPI 4.1.4 with the external PMIx
 * 4.2 of Debian 12 now and then never returns from MPI_Comm_spawn (a child
 * hangs in PMIx_Init; openpmix/openpmix#2735). After WATCHDOG_S seconds
 * without progress the parent prints HANG and exits with code 3, mpirun
 * tears the job down, and bench-spawn.sh starts a new run for the rounds
 * still missing.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCHDOG_S 10

static const char *label = "ompi";
static char hang_line[128];
static int hang_len;

static void on_alarm(int sig)
{
    (void)sig;
    if (write(1, hang_line, hang_len) < 0) {
        /* nothing left to do */
    }
    _exit(3);
}

/* arm restarts the watchdog for the step about to run. */
static void arm(int k, int round)
{
    hang_len = snprintf(hang_line, sizeof hang_line, "HANG {\"impl\":\"%s\",\"k\":%d,\"round\":%d}\n", label, k, round);
    alarm(WATCHDOG_S);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* The parent cannot see its children exit through MPI; it polls their PIDs
 * (same host). A child gone for good answers ESRCH. */
static int wait_gone(const int *pids, int n)
{
    long long limit = now_ns() + 30000000000LL;
    for (int i = 0; i < n; i++) {
        while (kill(pids[i], 0) == 0 || errno != ESRCH) {
            if (now_ns() > limit) {
                fprintf(stderr, "spawn_bench: child %d still running after 30 s\n", pids[i]);
                return -1;
            }
            nap_ms(1);
        }
    }
    return 0;
}

static int child(const char *mode)
{
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    MPI_Barrier(parent);
    if (strcmp(mode, "lat") == 0) {
        int pid = (int)getpid();
        MPI_Send(&pid, 1, MPI_INT, 0, 0, parent);
    } else {
        /* Sleep until the parent ends the rate run: a blocking barrier would
         * spin on a core. */
        MPI_Request req;
        int done = 0;
        MPI_Ibarrier(parent, &req);
        while (!done) {
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            if (!done)
                nap_ms(2);
        }
    }
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
}

static int latency(const char *self, int k, int rounds, int warmup)
{
    char *cargv[] = {"child", "lat", NULL};
    int *errs = calloc(k, sizeof *errs), *pids = calloc(k, sizeof *pids);
    for (int r = -warmup; r < rounds; r++) {
        MPI_Comm inter;
        arm(k, r);
        long long t0 = now_ns();
        MPI_Comm_spawn((char *)self, cargv, k, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
        MPI_Barrier(inter);
        long long t1 = now_ns();
        for (int i = 0; i < k; i++) {
            if (errs[i] != MPI_SUCCESS) {
                fprintf(stderr, "spawn_bench: child %d failed to start (%d)\n", i, errs[i]);
                return 1;
            }
            MPI_Recv(&pids[i], 1, MPI_INT, i, 0, inter, MPI_STATUS_IGNORE);
        }
        MPI_Comm_disconnect(&inter);
        if (wait_gone(pids, k) != 0)
            return 1;
        if (r >= 0)
            printf("ROUND {\"impl\":\"%s\",\"k\":%d,\"round\":%d,\"ns\":%lld}\n", label, k, r, t1 - t0);
        fflush(stdout);
    }
    free(errs);
    free(pids);
    return 0;
}

static int rate(const char *self, int n)
{
    char *cargv[] = {"child", "rate", NULL};
    MPI_Comm *inter = calloc(n, sizeof *inter);
    int err;
    long long t0 = now_ns();
    for (int i = 0; i < n; i++) {
        arm(0, -1 - i);
        MPI_Comm_spawn((char *)self, cargv, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter[i], &err);
        if (err != MPI_SUCCESS) {
            fprintf(stderr, "spawn_bench: rate spawn %d failed (%d)\n", i, err);
            return 1;
        }
        MPI_Barrier(inter[i]);
    }
    long long t1 = now_ns();
    arm(0, -1 - n);
    for (int i = 0; i < n; i++) {
        /* Wakes child i. Nonblocking collectives match only nonblocking
         * ones, so this is an Ibarrier too. */
        MPI_Request req;
        MPI_Ibarrier(inter[i], &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Comm_disconnect(&inter[i]);
    }
    alarm(0);
    printf("RATE {\"impl\":\"%s\",\"n\":%d,\"ns\":%lld}\n", label, n, t1 - t0);
    fflush(stdout);
    free(inter);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Comm parent;
    int rc = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return child(argc > 2 ? argv[2] : "lat");
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: spawn_bench KS ROUNDS WARMUP RATE_N [LABEL]\n");
        MPI_Finalize();
        return 2;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        perror("spawn_bench: /proc/self/exe");
        MPI_Finalize();
        return 1;
    }
    self[len] = 0;
    if (argc == 6)
        label = argv[5];
    signal(SIGALRM, on_alarm);
    int rounds = atoi(argv[2]), warmup = atoi(argv[3]), n = atoi(argv[4]);
    char *ks = strdup(argv[1]);
    for (char *tok = strtok(ks, ","); tok != NULL && rc == 0 && strcmp(ks, "-") != 0; tok = strtok(NULL, ","))
        rc = latency(self, atoi(tok), rounds, warmup);
    alarm(0);
    if (rc == 0 && n > 0)
        rc = rate(self, n);
    free(ks);
    MPI_Finalize();
    return rc;
}
