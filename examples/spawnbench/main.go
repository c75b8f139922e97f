// Command spawnbench is the dynrt side of scripts/bench-spawn.sh: how long it
// takes a running 1-process job to grow by k processes until all of them
// share a communicator with the original process and a barrier over it has
// completed (seed 003's spawn latency, against MPI_Comm_spawn), and how many
// such grows by one it does per second (seed 003's spawn rate).
//
//	dynrun -n 1 spawnbench [-k 1,4,8] [-rounds 10] [-warmup 1] [-rate 16] [-blocking] [-tcp]
//	spawnbench report FILE...
//
// Under dynrun, rank 0 drives: per round it requests ADD k
// (session.RequestRC), builds UNION(app set, delta) (phase 2), accepts over
// its communicator (session.Accept with Over, phase 3), builds the communicator over
// the new set and enters its barrier; the new processes confirm, build the
// same communicator and enter the barrier. The clock runs from the request
// to the end of the barrier at rank 0. Then rank 0 shrinks the job back to
// one process (SUB k, untimed) and waits until the removed processes are
// gone. Each round prints one line
//
//	ROUND {"impl":"dynrt","k":4,"round":0,"ns":...,"size":5,...breakdown}
//
// and the rate run (1→2→…→1+n, every process taking part in every grow, as
// a malleable job's members do) prints RATE {"impl":"dynrt","n":16,"ns":...}.
//
// The report subcommand reads those lines (and the same lines of
// testdata/spawn/spawn_bench.c, impl "ompi") and prints the medians per k,
// the ratio dynrt/Open MPI and the rates as markdown tables.
package main

import "github.com/dynrt/dynrt/lib/cliutil"

func main() { cliutil.RunMain(Main) }
