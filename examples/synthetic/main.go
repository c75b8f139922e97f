// Command synthetic is the thesis's synthetic benchmark (§8.1.1) on dynrt:
// the malleable loop of listing 6.7 around the work and rebalance steps of
// listing 8.1. Every iteration rebalances the problem over the processes,
// synchronises, counts the sampling points of a trajectory inside a box,
// sums the count over the communicator, and then runs the resource-change
// step: rank 0 asks for a change itself (--trigger app, thesis §8.1.1) or
// only looks for one sent by dynrc (--trigger external); a change found is
// adapted to in the three phases, and a new communicator is built over the
// set the change produced. Processes started by an ADD confirm (listing
// 6.6), build the same communicator and join the loop at the iteration rank
// 0 broadcasts.
//
// Rank 0 writes one JSON line per iteration, one per change once it has
// ended and one at the end (package report), then the summary tables in
// the shape of thesis tables 8.2/8.3 and figures 8.2/8.3 as lines starting
// with "# ". The sum of the counts must be the same in every iteration,
// whatever the number of processes; if it is not, the run fails.
//
//	dynrun -n 8 synthetic --mode inc --start 8 --limit 32 --delta 8 -f 5 -i 40
//
// See docs/synthetic.md.
package main

import "github.com/dynrt/dynrt/lib/cliutil"

func main() { cliutil.RunMain(Main) }
