package master

import (
	"fmt"
	"strings"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// The choice of a job's PMI service (docs/mpi.md "Open MPI (PMIx)").
// --pmi auto offers what the program needs, as the launcher found it from
// the program's file (lib/mpidetect, JobLaunchReq.PMINeed): PMIx to a
// program linking Open MPI, PMI_FD to everything else. It does not offer
// every mechanism to every job: registering a job with the PMIx server costs
// the daemon milliseconds per job (and its first use, the server's start,
// tens of milliseconds), a price a non-MPI launch must not pay. A program
// that needs PMIx on daemons built without it is refused with the fix,
// where it would otherwise run as N singletons, each "rank 0 of 1".

// pmiSelect returns the PMI mode b's job runs with, given the names of the
// nodes it is placed on whose daemons host no PMIx server.
func pmiSelect(b *wire.JobLaunchReq, without []string) (string, error) {
	switch b.PMI {
	case wire.PMIPMIx, wire.PMIBoth:
		if len(without) > 0 {
			return "", wire.Errorf(wire.ErrUnsupported, "master: --pmi %s: %s: %s", b.PMI, noPMIx(without), pmixFix)
		}
		return b.PMI, nil
	case "", wire.PMIAuto:
	default:
		return b.PMI, nil
	}
	switch b.PMINeed {
	case wire.PMINeedPMIx:
	case wire.PMINeedUnknown:
		// A script or an interpreter may start either MPI (python3 with
		// an Open MPI mpi4py): both services, where every daemon has
		// both; else the one every daemon has.
		if len(without) > 0 {
			return wire.PMIFD, nil
		}
		return wire.PMIBoth, nil
	default:
		// MPICH or no MPI: the service that costs nothing unless spoken.
		return wire.PMIFD, nil
	}
	if len(without) > 0 {
		why := b.PMIWhy
		if why == "" {
			why = "needs PMIx"
		}
		return "", wire.Errorf(wire.ErrUnsupported, "master: %s %s, which speaks PMIx only, but %s: %s; or build it with mpicc.mpich (--pmi none starts it anyway, as singletons)",
			progName(b.Argv), why, noPMIx(without), pmixFix)
	}
	return wire.PMIPMIx, nil
}

// pmixFix is what to do about daemons without PMIx.
const pmixFix = "rebuild dynrun with `make` on a machine with libpmix-dev (make deps-openmpi), or with go build -tags pmix"

// noPMIx says which daemons lack PMIx (the first three of them).
func noPMIx(nodes []string) string {
	if len(nodes) == 1 {
		return fmt.Sprintf("the daemon of node %s was built without PMIx support (libpmix-dev)", nodes[0])
	}
	list := strings.Join(nodes[:min(len(nodes), 3)], ", ")
	if len(nodes) > 3 {
		list += fmt.Sprintf(" and %d more", len(nodes)-3)
	}
	return fmt.Sprintf("the daemons of nodes %s were built without PMIx support (libpmix-dev)", list)
}

func progName(argv []string) string {
	if len(argv) == 0 {
		return "the program"
	}
	return argv[0]
}

// withoutPMIx names the nodes of a placement whose daemons host no PMIx
// server, in node order.
func (s *state) withoutPMIx(placed []alloc.Proc) []string {
	used := make(map[int]bool)
	for _, pr := range placed {
		used[pr.Node] = true
	}
	var out []string
	for _, n := range s.nodes {
		if used[n.idx] && !n.pmix {
			out = append(out, n.name)
		}
	}
	return out
}
