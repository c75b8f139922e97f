/* spawn_multi: MPI_Comm_spawn_multiple of two commands, both this program:
 * one process with the argument "a" and two with "b".
 *
 *   spawn_multi            the parent spawns without info keys
 *   spawn_multi H1 H2      command a gets the info key host=H1, command b
 *                          host=H2; the children then also say on which
 *                          dynrt node they run ($DYNRT_NODE, "?" if unset)
 *
 * Each child prints its rank, MPI_APPNUM and argument, and sends
 * 10 * appnum + rank to the parent's rank 0, which checks all three and
 * prints a summary; everybody disconnects. Exit 5 on any surprise. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    int rank, size, *appnum, flag, i, x, bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        char *mode = argc == 3 ? "hosts" : "any";
        char *cmds[2], *args_a[] = {"a", mode, NULL}, *args_b[] = {"b", mode, NULL};
        char **args[2] = {args_a, args_b};
        int np[2] = {1, 2};
        MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};

        if (argc != 1 && argc != 3)
            MPI_Abort(MPI_COMM_WORLD, 2);
        cmds[0] = cmds[1] = (char *)base;
        for (i = 0; argc == 3 && i < 2; i++) {
            MPI_Info_create(&infos[i]);
            MPI_Info_set(infos[i], "host", argv[1 + i]);
        }
        MPI_Comm_spawn_multiple(2, cmds, args, np, infos, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
        for (i = 0; argc == 3 && i < 2; i++)
            MPI_Info_free(&infos[i]);
        if (rank == 0) {
            for (i = 0; i < 3; i++) {
                MPI_Recv(&x, 1, MPI_INT, i, 0, inter, MPI_STATUS_IGNORE);
                bad += x != 10 * (i > 0) + i;
            }
            printf("parent: 3 children, %s\n", bad ? "wrong appnums" : "appnums 0 1 1");
        }
        MPI_Comm_disconnect(&inter);
    } else {
        const char *node = getenv("DYNRT_NODE");
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
        printf("child %d of %d: appnum %d, argument %s\n", rank, size, flag ? *appnum : -1, argc > 1 ? argv[1] : "none");
        if (argc > 2 && strcmp(argv[2], "hosts") == 0)
            printf("child %d on %s\n", rank, node != NULL ? node : "?");
        fflush(stdout);
        x = 10 * (flag ? *appnum : 9) + rank;
        MPI_Send(&x, 1, MPI_INT, 0, 0, parent);
        MPI_Comm_disconnect(&parent);
    }
    MPI_Finalize();
    return bad ? 5 : 0;
}
