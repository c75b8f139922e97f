/* yield_idle: every rank reports Open MPI's mpi_yield_when_idle as MPI_T
 * reads it after MPI_Init. Open MPI turns it on when its launcher says the
 * node is oversubscribed (OMPI_MCA_mpi_oversubscribe=1): a waiting rank
 * then yields the CPU instead of spinning. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, provided, n, v = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n; i++) {
        char name[256], desc[1024];
        int nlen = sizeof name, dlen = sizeof desc, verb, bind, scope, count;
        MPI_Datatype type;
        MPI_T_enum en;
        MPI_T_cvar_handle h;

        if (MPI_T_cvar_get_info(i, name, &nlen, &verb, &type, &en, desc, &dlen, &bind, &scope) != MPI_SUCCESS ||
            strcmp(name, "mpi_yield_when_idle") != 0)
            continue;
        /* Open MPI keeps a bool as MPI_C_BOOL: one byte. */
        unsigned char buf[16] = {0};
        MPI_T_cvar_handle_alloc(i, NULL, &h, &count);
        MPI_T_cvar_read(h, buf);
        MPI_T_cvar_handle_free(&h);
        if (type == MPI_C_BOOL)
            v = buf[0];
        else
            memcpy(&v, buf, sizeof v);
        break;
    }
    MPI_T_finalize();
    printf("yield rank=%d v=%d\n", rank, v);
    MPI_Finalize();
    return 0;
}
