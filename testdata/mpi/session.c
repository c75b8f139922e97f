/* session: the MPI-4 sessions model. Lists the process sets MPI reports
 * (it must include mpi://WORLD and mpi://SELF) and builds a communicator
 * from mpi://WORLD, whose size must be the job's. Exit 6 otherwise. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    MPI_Session s;
    MPI_Group g;
    MPI_Comm c;
    int n, i, len, world = 0, self = 0, size = -1, rank = -1, wsize = -1;
    char name[MPI_MAX_PSET_NAME_LEN];

    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
    MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n);
    for (i = 0; i < n; i++) {
        len = sizeof name;
        MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name);
        if (strcmp(name, "mpi://WORLD") == 0)
            world = 1;
        if (strcmp(name, "mpi://SELF") == 0)
            self = 1;
    }
    MPI_Group_from_session_pset(s, "mpi://WORLD", &g);
    MPI_Comm_create_from_group(g, "org.dynrt.test", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
    MPI_Comm_size(c, &size);
    MPI_Comm_rank(c, &rank);
    MPI_Allreduce(&size, &wsize, 1, MPI_INT, MPI_MAX, c);
    printf("session rank=%d size=%d psets=%d world=%d self=%d\n", rank, size, n, world, self);
    MPI_Comm_free(&c);
    MPI_Group_free(&g);
    MPI_Session_finalize(&s);
    return world && self && size == wsize ? 0 : 6;
}
