/* p2p_desc: rank 0 exchanges one message with every other rank, the
 * highest rank first. With MPICH's ch3 device every first contact with a
 * rank on another node reads that rank's business card from PMI
 * ("P<r>-businesscard"), so rank 0 asks for P11, P10, P9, ... in that
 * order: with the PMI-2 client of MPICH 4.0.x, the request for P9 then
 * carries garbage left over from the longer request for P10.
 * Prints " No Errors" from rank 0 when every reply is right. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, r, v, errs = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        for (r = size - 1; r > 0; r--) {
            MPI_Send(&r, 1, MPI_INT, r, 0, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (v != 2 * r) {
                printf("rank %d answered %d, want %d\n", r, v, 2 * r);
                errs++;
            }
        }
        if (errs == 0)
            printf(" No Errors\n");
    } else {
        MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        v *= 2;
        MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
