/* split: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups the ranks MPICH
 * believes share a node (from PMI_process_mapping); each rank prints the
 * world ranks of its group. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, lrank, lsize, i;
    int *members;
    MPI_Comm shared;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
    MPI_Comm_rank(shared, &lrank);
    MPI_Comm_size(shared, &lsize);
    members = malloc(sizeof(int) * lsize);
    MPI_Allgather(&rank, 1, MPI_INT, members, 1, MPI_INT, shared);
    printf("split rank=%d local=%d/%d members=", rank, lrank, lsize);
    for (i = 0; i < lsize; i++)
        printf(i ? ",%d" : "%d", members[i]);
    printf("\n");
    free(members);
    MPI_Comm_free(&shared);
    MPI_Finalize();
    return 0;
}
