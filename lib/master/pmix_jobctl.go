package master

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/dynrt/dynrt/wire"
)

// handlePMIJobCtl serves PMIx_Job_control relayed by a daemon: a kill of
// whole jobs ends them as dynrt's kill does (the jobs they spawned with
// them); a kill of ranks ends those processes (SIGTERM, SIGKILL after the
// grace), and their job reacts as to any process the runtime ended; a
// signal is sent alone. Targets are limited to the caller's spawn tree,
// as under mpirun, whose processes cannot reach another mpirun's.
func (m *Master) handlePMIJobCtl(ctx context.Context, _ *wire.Request, b *wire.PMIJobCtl) (any, error) {
	if b.Signal < 0 || b.Signal > 64 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: bad signal %d in a PMIx job control of rank %d of job %s", b.Signal, b.Rank, b.Job)
	}
	return nil, do(ctx, m, func(s *state) error {
		j, err := s.job(b.Job)
		if err != nil {
			return err
		}
		procs := b.Procs
		if len(procs) == 0 {
			procs = []wire.ProcRanges{{Job: j.ns}}
		}
		targets := make([]*job, len(procs))
		for i, pr := range procs {
			ns := pr.Job
			if ns == "" {
				ns = j.ns
			}
			t, err := s.job(ns)
			if err != nil {
				return err
			}
			if spawnRoot(t) != spawnRoot(j) {
				return wire.Errorf(wire.ErrPermission, "master: rank %d of job %s may not kill or signal processes of job %s (PMIx job control reaches the jobs of its own spawn tree only)", b.Rank, j.ns, t.ns)
			}
			if err := pr.Ranks.Check(); err != nil {
				return err
			}
			targets[i] = t
		}
		for i, pr := range procs {
			t := targets[i]
			switch {
			case t.done:
			case b.Signal != 0:
				s.killRanks(t, &wire.KillReq{Ranks: pr.Ranks, Signal: b.Signal, Only: true})
			case len(pr.Ranks) == 0:
				s.killJob(t, killOrder{reason: reasonKill, msg: fmt.Sprintf("rank %d of job %s killed it (PMIx job control)", b.Rank, j.ns)})
			default:
				s.killRanks(t, &wire.KillReq{Ranks: pr.Ranks, Signal: int(syscall.SIGTERM), GraceMS: s.m.grace.Milliseconds()})
			}
		}
		return nil
	})
}

// pmixJob reports whether a process of j began a PMIx session.
func (j *job) pmixJob() bool {
	return j.pmi != nil && j.pmi.used && j.pmi.info != nil && j.pmi.info.Mode == wire.PMIPMIx
}

// pmixMalleable reports whether every live process of the PMIx job j
// declared itself malleable, so that its daemons announce changes to it.
func (j *job) pmixMalleable() bool {
	all := true
	j.procs.each(func(r uint32, p *jproc) {
		if (p.state == wire.ProcStateLaunching || p.state == wire.ProcStateRunning) && !j.pmi.malleable[r] {
			all = false
		}
	})
	return all && len(j.pmi.malleable) > 0
}

// pmixSpaceName names the PMIx namespace of the processes that the
// change delta (mpi://rte/<app>/rc/<n>) adds to the PMIx job ns:
// "<ns>.rc<n>". PMIx cannot grow a running namespace (OpenPMIx 4.2
// re-registers one only to update its process data), so each ADD's
// processes form a namespace of their own.
func pmixSpaceName(ns, delta string) string {
	return ns + ".rc" + delta[strings.LastIndexByte(delta, '/')+1:]
}

// pmixJoin records the namespace of the new processes of the ADD run of
// the PMIx job j (before the job data that carries it is pushed).
func (j *job) pmixJoin(run *rcRun) {
	if !run.adds() || !j.pmixJob() {
		return
	}
	j.pmi.spaces = append(j.pmi.spaces, wire.PMIxSpace{
		Nspace: pmixSpaceName(j.ns, run.r.Delta()), Ranks: run.delta, Delta: run.r.Delta(),
	})
}

// pmixSpaces is what the job data says of the namespaces (nil: none).
func (j *job) pmixSpaces() []wire.PMIxSpace {
	if j.pmi == nil {
		return nil
	}
	return slices.Clone(j.pmi.spaces)
}

// pmixLaunch is the PMI part of the launch of an ADD's processes: a PMIx
// job's new processes get PMIx (their daemons register their namespace);
// other jobs' none, as before.
func (j *job) pmixLaunch() *wire.PMIJob {
	if !j.pmixJob() {
		return nil
	}
	return &wire.PMIJob{Mode: wire.PMIPMIx, Universe: j.pmi.info.Universe}
}
