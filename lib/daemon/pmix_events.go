package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/wire"
)

// JobControl serves PMIx_Job_control of a process of the job: the master
// kills or signals the targets (a job of the caller's spawn tree, whole
// or some of its ranks), as dynrt's own kill does.
func (j *pmixJob) JobControl(p pmix.Proc, targets []pmix.Proc, ctl pmix.JobCtl, done func(error)) {
	req := &wire.PMIJobCtl{Job: j.ns, Rank: p.Rank, Procs: procRanges(targets)}
	if !ctl.Kill {
		req.Signal = ctl.Signal
	}
	ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
	defer cancel()
	done(pmixStatus(j.svc.d.master.Call(ctx, wire.KindPMIJobCtl, req, nil)))
}

// procRanges groups PMIx processes by namespace, in the order of their
// first appearance; a namespace's wildcard stands for all of it (no
// ranks).
func procRanges(ps []pmix.Proc) []wire.ProcRanges {
	var order []string
	ranks := map[string][]uint32{}
	whole := map[string]bool{}
	for _, p := range ps {
		if _, seen := ranks[p.Nspace]; !seen {
			order = append(order, p.Nspace)
			ranks[p.Nspace] = nil
		}
		if p.Rank == pmix.RankWildcard {
			whole[p.Nspace] = true
			continue
		}
		ranks[p.Nspace] = append(ranks[p.Nspace], p.Rank)
	}
	out := make([]wire.ProcRanges, 0, len(order))
	for _, ns := range order {
		pr := wire.ProcRanges{Job: ns}
		if !whole[ns] {
			rs := ranks[ns]
			slices.Sort(rs)
			pr.Ranks = wire.RangesOf(slices.Compact(rs))
		}
		out = append(out, pr)
	}
	return out
}
