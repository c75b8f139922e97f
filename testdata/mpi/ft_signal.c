/* ft_signal: what any MPICH build sees of a launcher's fault
 * notification. The program installs its own SIGUSR1 handler before
 * MPI_Init (MPICH installs one too and calls the earlier one from it).
 * After a barrier, rank 1 exits without MPI_Finalize, with the status given
 * as the argument (default 3; a negative one: killed by that signal); the
 * others wait up to 10 s for SIGUSR1, print how many they got and leave
 * without MPI_Finalize (which would wait for rank 1 for ever with
 * ch4:ucx). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void on_usr1(int sig)
{
    (void) sig;
    got++;
}

int main(int argc, char **argv)
{
    int rank, i, code = argc > 1 ? atoi(argv[1]) : 3;

    signal(SIGUSR1, on_usr1);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1 && code < 0)
        kill(getpid(), -code);
    if (rank == 1)
        exit(code);
    for (i = 0; i < 1000 && !got; i++)
        usleep(10000);
    printf("ft_signal rank=%d sigusr1=%s\n", rank, got ? "yes" : "no");
    fflush(stdout);
    _exit(0);
}
