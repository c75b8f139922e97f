// Command scalebench measures how dynrt's costs grow with the size of a
// DVM (issue 16), on a simulated DVM (internal/simdvm): the real master
// in this process, the real daemons of nodes 1.. in a second process (the
// nodes host, this binary again), their processes simulated
// (lib/simnode). docs/scale.md describes what is real and what is not.
//
//	scalebench [-nodes 16,64,256,1024] [-slots 64] [-o DIR]
//
// For every size it prints a table row and writes DIR/scale.tsv,
// DIR/scale.svg and DIR/scale.png (cost against nodes, log-log) and the
// growth exponents (least-squares slope of log cost on log nodes).
// scripts/bench-scale.sh runs it.
package main

import (
	"github.com/dynrt/dynrt/internal/simdvm"
	"github.com/dynrt/dynrt/lib/cliutil"
)

func main() {
	if simdvm.IsHost() {
		cliutil.RunMain(hostMain)
	}
	cliutil.RunMain(Main)
}
