/* spawn_tree: MPI_Comm_spawn as MPICH's spawn tests use it, for the ch3
 * device (Debian's ch4:ucx build cannot spawn).
 *
 *   spawn_tree N ok     the parent spawns N copies of itself by base name
 *                       with the info key path "." (so the program is found
 *                       in the working directory, not in $PATH); each child
 *                       sends its rank back; everybody reports whether
 *                       MPI_UNIVERSE_SIZE is set (unset under Hydra).
 *   spawn_tree N abort  the same, but child rank 0 calls MPI_Abort(7) while
 *                       the parent waits for it in MPI_Recv.
 *   spawn_tree N missing  the parent spawns N processes of a program that
 *                       does not exist, with MPI_ERRORS_RETURN, and reports
 *                       what MPI_Comm_spawn returned (Hydra 4.0.2 hangs).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    MPI_Info info;
    int rank, size, flag, *usize, n, i, x, errs = 0;
    const char *base;
    char *args[3];

    MPI_Init(&argc, &argv);
    if (argc != 3)
        MPI_Abort(MPI_COMM_WORLD, 2);
    n = atoi(argv[1]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &usize, &flag);
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL && strcmp(argv[2], "missing") == 0) {
        int codes[64], failed = 0, rc;
        if (n > 64)
            MPI_Abort(MPI_COMM_WORLD, 2);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        rc = MPI_Comm_spawn("./no_such_program", MPI_ARGV_NULL, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
        for (i = 0; i < n; i++)
            failed += codes[i] != MPI_SUCCESS;
        if (rank == 0)
            printf("spawn of a missing program: %s, %d of %d error codes set\n", rc == MPI_SUCCESS ? "success" : "error", failed, n);
    } else if (parent == MPI_COMM_NULL) {
        base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        args[0] = argv[1];
        args[1] = argv[2];
        args[2] = NULL;
        MPI_Info_create(&info);
        MPI_Info_set(info, "path", ".");
        MPI_Comm_spawn(base, args, n, info, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
        MPI_Info_free(&info);
        if (rank == 0) {
            for (i = 0; i < n; i++) {
                MPI_Recv(&x, 1, MPI_INT, i, 0, inter, MPI_STATUS_IGNORE);
                if (x != i)
                    errs++;
            }
            printf("parent: %d children, universe %s\n", n, flag ? "set" : "unset");
        }
        MPI_Comm_disconnect(&inter);
        if (rank == 0 && errs == 0)
            printf("No Errors\n");
    } else {
        printf("child %d of %d: universe %s\n", rank, size, flag ? "set" : "unset");
        fflush(stdout);
        if (rank == 0 && strcmp(argv[2], "abort") == 0)
            MPI_Abort(MPI_COMM_WORLD, 7);
        MPI_Send(&rank, 1, MPI_INT, 0, 0, parent);
        MPI_Comm_disconnect(&parent);
    }
    MPI_Finalize();
    return 0;
}
