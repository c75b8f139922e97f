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

// pmiDiedBefore says whether rank r of j, failing now, failed before the
// rank that is the job's first failure so far: r was reported dead through
// PMI before it (or it never was). A rank reported dead failed before any
// process that was told of it; that process's own failure may still be
// booked first (say MPICH's ch3 crashing in MPI_Finalize on the
// notification), since exits travel apart from PMI reports. The job's
// status is then the dead rank's, as under Hydra.
func (s *state) pmiDiedBefore(j *job, r, first uint32) bool {
	if j.pmi == nil {
		return false
	}
	i := slices.Index(j.pmi.dead, r)
	k := slices.Index(j.pmi.dead, first)
	return i >= 0 && (k < 0 || i < k)
}
