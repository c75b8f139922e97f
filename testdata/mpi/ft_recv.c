/* ft_recv: MPICH fault tolerance under a launcher that reports dead
 * processes (Hydra's -disable-auto-cleanup, dynrun's --keep-going). After
 * a barrier, rank 1 exits with status 1 without MPI_Finalize; every other
 * rank then waits in a receive from it, which must fail with
 * MPIX_ERR_PROC_FAILED once the launcher has told the process (SIGUSR1 and
 * the PMI key PMI_dead_processes; an MPICH built for ch3 reads them).
 * Rank 0 prints "No Errors" when its receive failed that way; a rank whose
 * receive ended otherwise says so. Needs MPIR_CVAR_ENABLE_FT=1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, x = 0, rc, class = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        exit(1);
    rc = MPI_Recv(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &class);
    if (rc == MPI_SUCCESS || class != MPIX_ERR_PROC_FAILED) {
        printf("rank %d: receive from the dead rank 1 returned %d (class %d), want MPIX_ERR_PROC_FAILED\n",
               rank, rc, class);
    } else if (rank == 0) {
        printf(" No Errors\n");
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
