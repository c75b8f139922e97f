/* hello_mpi: every rank reports itself; with an argument, the world size
 * must equal it (exit 3 otherwise); with a second argument "host", each
 * line ends with the rank's MPI processor name (the tests across hosts).
 * Used by the MPI tests and by scripts/bench-mpi.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, flag, *attr, appnum = -1, universe = -1;
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &attr, &flag);
    if (flag)
        appnum = *attr;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &attr, &flag);
    if (flag)
        universe = *attr;
    if (argc > 1 && size != atoi(argv[1])) {
        fprintf(stderr, "rank %d: size %d, want %s\n", rank, size, argv[1]);
        MPI_Finalize();
        return 3;
    }
    if (rank < 0 || rank >= size) {
        fprintf(stderr, "rank %d out of range for size %d\n", rank, size);
        return 3;
    }
    if (argc > 2 && strcmp(argv[2], "host") == 0)
        printf("hello rank=%d size=%d appnum=%d universe=%d host=%s\n", rank, size, appnum, universe, host);
    else
        printf("hello rank=%d size=%d appnum=%d universe=%d\n", rank, size, appnum, universe);
    MPI_Finalize();
    return 0;
}
