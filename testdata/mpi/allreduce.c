/* allreduce: sums the ranks with MPI_Allreduce and passes a token around
 * a ring, so data crosses between (virtual) nodes; exit 4 on a wrong
 * result. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, sum = 0, token = -1, bad = 0;
    long want;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    want = (long) size * (size - 1) / 2;
    if (sum != want)
        bad = 1;
    MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 7, &token, 1, MPI_INT,
                 (rank + size - 1) % size, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (token != (rank + size - 1) % size)
        bad = 1;
    printf("allreduce rank=%d sum=%d token=%d %s\n", rank, sum, token, bad ? "BAD" : "ok");
    MPI_Finalize();
    return bad ? 4 : 0;
}
