package master

import (
	"context"
	"fmt"
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
