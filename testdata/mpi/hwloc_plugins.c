/* hwloc_plugins: every rank reports how many of hwloc's plugins
 * (/usr/lib/<arch>/hwloc/hwloc_*.so: libxml2, OpenCL, X11 and more behind
 * them) its MPI start-up loaded. Open MPI 4.1 loads them when it reads the
 * node's topology, which it does in MPI_Init unless the launcher says it
 * has applied the binding policy (mpirun.openmpi and dynrun do). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, n = 0;
    char line[4096];
    FILE *maps;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    maps = fopen("/proc/self/maps", "r");
    if (maps == NULL) {
        perror("/proc/self/maps");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* One line per mapped segment: count each plugin's first (r--p at
     * offset 0). */
    while (fgets(line, sizeof line, maps) != NULL) {
        if (strstr(line, "/hwloc/hwloc_") != NULL && strstr(line, " 00000000 ") != NULL)
            n++;
    }
    fclose(maps);
    printf("hwloc_plugins rank=%d n=%d\n", rank, n);
    MPI_Finalize();
    return 0;
}
