/* abort: after a barrier, rank 0 calls MPI_Abort with the code given as
 * the argument; the others wait in a receive that never completes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, code = argc > 1 ? atoi(argv[1]) : 1, x;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("abort rank=0 code=%d\n", code);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    MPI_Recv(&x, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
