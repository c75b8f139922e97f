/* connacc: MPI_Comm_accept / MPI_Comm_connect between two jobs, the port
 * passed through the name service.
 *   connacc server NAME  rank 0 opens a port and publishes it as NAME; the
 *                        whole job accepts (root 0)
 *   connacc client NAME  rank 0 looks NAME up (retrying until it appears);
 *                        the whole job connects (root 0)
 * Over the intercommunicator each rank i sends i+1 to rank i of the other
 * job (if there is one) and the roots exchange their job sizes; then both
 * merge it (server ranks first) and check an allreduce over the merged
 * communicator. Everybody disconnects; the server unpublishes and closes
 * its port. Exit 5 on any surprise. Debian's MPICH ch4:ucx cannot connect
 * (it has no ports); Open MPI needs a name server shared by both jobs
 * (mpirun --ompi-server, or dynrun's daemons). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, other, i, x, sum, msize, mrank, bad = 0, server;
    char port[MPI_MAX_PORT_NAME] = "";
    MPI_Comm inter, merged;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (argc < 3 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
        fprintf(stderr, "usage: connacc server|client NAME\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    server = strcmp(argv[1], "server") == 0;
    if (server) {
        if (rank == 0) {
            if (MPI_Open_port(MPI_INFO_NULL, port) != MPI_SUCCESS ||
                MPI_Publish_name(argv[2], MPI_INFO_NULL, port) != MPI_SUCCESS) {
                fprintf(stderr, "connacc server: cannot open or publish a port\n");
                MPI_Abort(MPI_COMM_WORLD, 5);
            }
            printf("connacc server published %s\n", argv[2]);
            fflush(stdout);
        }
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    } else {
        if (rank == 0) {
            for (i = 0; i < 3000 && MPI_Lookup_name(argv[2], MPI_INFO_NULL, port) != MPI_SUCCESS; i++)
                usleep(10000);
            if (i == 3000) {
                fprintf(stderr, "connacc client: %s never appeared\n", argv[2]);
                MPI_Abort(MPI_COMM_WORLD, 5);
            }
        }
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    }
    MPI_Comm_remote_size(inter, &other);
    /* Point to point across the jobs: rank i to rank i of the other side. */
    if (rank < other) {
        x = rank + 1;
        if (server) {
            MPI_Send(&x, 1, MPI_INT, rank, 1, inter);
            MPI_Recv(&x, 1, MPI_INT, rank, 2, inter, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&x, 1, MPI_INT, rank, 1, inter, MPI_STATUS_IGNORE);
            MPI_Send(&x, 1, MPI_INT, rank, 2, inter);
        }
        if (x != rank + 1)
            bad = 1;
    }
    /* The merged communicator: server ranks first. */
    MPI_Intercomm_merge(inter, server ? 0 : 1, &merged);
    MPI_Comm_size(merged, &msize);
    MPI_Comm_rank(merged, &mrank);
    x = mrank + 1;
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, merged);
    if (msize != size + other || sum != msize * (msize + 1) / 2 || (server ? mrank != rank : mrank != rank + other))
        bad = 1;
    if (rank == 0)
        printf("connacc %s: %d local, %d remote, merged %d, sum %d%s\n", argv[1], size, other, msize, sum, bad ? " WRONG" : "");
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    if (server && rank == 0) {
        if (MPI_Unpublish_name(argv[2], MPI_INFO_NULL, port) != MPI_SUCCESS)
            bad = 1;
        MPI_Close_port(port);
    }
    MPI_Finalize();
    return bad ? 5 : 0;
}
