/* pubsub: MPI_Publish_name / MPI_Lookup_name between two jobs.
 *   pubsub server NAME [dup-ok]
 *                        publishes NAME -> "port-of-NAME", checks that a
 *                        second publish (same name and value) fails (with
 *                        dup-ok it may succeed: Open MPI's ompi-server lets
 *                        the publisher publish again), waits until the
 *                        client has published NAME-ack, unpublishes NAME
 *   pubsub client NAME   looks NAME up (retrying until it appears), checks
 *                        the port, publishes NAME-ack, waits for NAME to go
 * Only rank 0 talks to the name service. Exit 5 on any surprise. Debian's
 * MPICH (ch4:ucx) cannot open real ports, so the port is a plain string. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int lookup(const char *name, char *port)
{
    return MPI_Lookup_name(name, MPI_INFO_NULL, port);
}

int main(int argc, char **argv)
{
    int rank, rc, i, bad = 0;
    char name[256], ack[300], want[300], port[MPI_MAX_PORT_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (argc < 3) {
        fprintf(stderr, "usage: pubsub server|client NAME [dup-ok]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(name, sizeof name, "%s", argv[2]);
    snprintf(ack, sizeof ack, "%s-ack", name);
    snprintf(want, sizeof want, "port-of-%s", name);
    if (rank == 0 && strcmp(argv[1], "server") == 0) {
        if (MPI_Publish_name(name, MPI_INFO_NULL, want) != MPI_SUCCESS)
            bad = 1;
        if (MPI_Publish_name(name, MPI_INFO_NULL, want) == MPI_SUCCESS) {
            printf("pubsub server second publish of %s accepted\n", name);
            if (argc < 4 || strcmp(argv[3], "dup-ok") != 0) {
                fprintf(stderr, "second publish of %s succeeded\n", name);
                bad = 1;
            }
        } else
            printf("pubsub server second publish of %s refused\n", name);
        printf("pubsub server published %s\n", name);
        fflush(stdout);
        for (i = 0; i < 3000 && lookup(ack, port) != MPI_SUCCESS; i++)
            usleep(10000);
        if (i == 3000 || strcmp(port, "thanks") != 0)
            bad = 1;
        if (MPI_Unpublish_name(name, MPI_INFO_NULL, want) != MPI_SUCCESS)
            bad = 1;
        printf("pubsub server got %s=%s\n", ack, port);
    } else if (rank == 0) {
        for (i = 0; i < 3000 && (rc = lookup(name, port)) != MPI_SUCCESS; i++)
            usleep(10000);
        if (i == 3000 || strcmp(port, want) != 0)
            bad = 1;
        printf("pubsub client found %s=%s\n", name, port);
        if (MPI_Publish_name(ack, MPI_INFO_NULL, "thanks") != MPI_SUCCESS)
            bad = 1;
        for (i = 0; i < 3000 && lookup(name, port) == MPI_SUCCESS; i++)
            usleep(10000);
        if (i == 3000)
            bad = 1;
        if (MPI_Unpublish_name(ack, MPI_INFO_NULL, "thanks") != MPI_SUCCESS)
            bad = 1;
        if (lookup("no-such-service-anywhere", port) == MPI_SUCCESS)
            bad = 1;
        printf("pubsub client done\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return bad ? 5 : 0;
}
