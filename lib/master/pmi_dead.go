package master

import (
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// Fault notification for MPI jobs launched with --keep-going (Hydra's
// -disable-auto-cleanup; docs/mpi.md "Failures"). A process that leaves
// PMI without finalize does not end its job: the master keeps the job's
// list of such ranks, in the order their daemons reported them, and sends
// the whole list to every daemon running ranks of the job. Each daemon
// stores it as the job's PMI_dead_processes and only then sends SIGUSR1
// to its processes of the job, so MPICH's handler, which reads the key at
// once, finds the rank that died wherever it runs. The list has one
// owner, this loop, so every node sees the same order.

// pmiDead records that rank of the keep-going job j left PMI early and
// tells the job's daemons. A rank reported twice is listed once.
func (s *state) pmiDead(j *job, rank uint32) {
	if j.pmi == nil || slices.Contains(j.pmi.dead, rank) {
		return
	}
	j.pmi.dead = append(j.pmi.dead, rank)
	msg := &wire.PMIDead{Job: j.ns, Ranks: slices.Clone(j.pmi.dead)}
	for idx := range j.nodes {
		if n := s.nodes[idx]; n.up {
			s.sendNode(n, outMsg{kind: wire.KindPMIDead, body: msg})
		}
	}
}
