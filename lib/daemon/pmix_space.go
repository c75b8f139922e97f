package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/wire"
)

// The namespaces of a PMIx job (docs/mpi.md, "Resource changes through
// PMIx"). PMIx cannot grow a running namespace (OpenPMIx 4.2.2 takes a
// second registration of a namespace only to update its process data),
// so the processes an ADD starts form a namespace of their own, named by
// the master (wire.PMIxSpace, in the job data on every daemon): dynrt
// rank b+i of the job is PMIx rank i of the ADD's namespace, b its first
// rank; the ranks no ADD started are the job's own namespace, PMIx rank =
// dynrt rank. Inside the daemon everything is keyed by dynrt job and
// rank; names cross to PMIx here.

// pmixSpace is the PMIx namespace of some ranks of a job.
type pmixSpace struct {
	ns    string
	base  uint32          // dynrt rank of PMIx rank 0
	ranks wire.RankRanges // nil for the job's own namespace
	delta string          // the ADD that started it ("" for the job's own)
	data  wire.JobData    // the job as this daemon knew it (for describe)
	// parent is the PMIx name of the process that spawned the job, if
	// one did (PMIX_PARENT_ID).
	parent *pmix.Proc
}

// spaceIn finds the namespace of rank in the job data (the latest ADD
// holding the rank: an aborted ADD's ranks go to the next one). Pure.
func spaceIn(data *wire.JobData, rank uint32) pmixSpace {
	for i := len(data.PMIx) - 1; i >= 0; i-- {
		sp := data.PMIx[i]
		if sp.Ranks.Contains(rank) {
			return pmixSpace{ns: sp.Nspace, base: sp.Ranks[0].Lo, ranks: sp.Ranks, delta: sp.Delta}
		}
	}
	return pmixSpace{ns: data.Job}
}

// pmixName is the PMIx name of rank of job; data is the job data of job
// (a rank of another job, or of a job without data, keeps its dynrt
// name). Pure.
func pmixName(data *wire.JobData, job string, rank uint32) pmix.Proc {
	if data == nil || data.Job != job {
		return pmix.Proc{Nspace: job, Rank: rank}
	}
	sp := spaceIn(data, rank)
	return pmix.Proc{Nspace: sp.ns, Rank: rank - sp.base}
}

// pmixNameIn is the PMIx name of rank of job as a member of set: the
// delta set of an ADD names its own namespace's processes, even once an
// aborted ADD's ranks went to the next one; any other set names the
// processes that have the ranks now (pmixName). Pure.
func pmixNameIn(data *wire.JobData, job, set string, rank uint32) pmix.Proc {
	if data != nil && data.Job == job {
		for _, sp := range data.PMIx {
			if sp.Delta == set && sp.Ranks.Contains(rank) {
				return pmix.Proc{Nspace: sp.Nspace, Rank: rank - sp.Ranks[0].Lo}
			}
		}
	}
	return pmixName(data, job, rank)
}

// dynrtOf turns a PMIx process of a namespace of data's job into dynrt
// processes (namespace = dynrt job, rank = dynrt rank); ok is false for
// other namespaces. A wildcard stands for the namespace's live ranks, and
// for the whole job (the wildcard kept) while the job has one namespace.
// Pure.
func dynrtOf(data *wire.JobData, p pmix.Proc) (ps []pmix.Proc, ok bool) {
	var sp *wire.PMIxSpace
	for i := len(data.PMIx) - 1; i >= 0 && sp == nil; i-- {
		if data.PMIx[i].Nspace == p.Nspace && len(data.PMIx[i].Ranks) > 0 {
			sp = &data.PMIx[i]
		}
	}
	switch {
	case sp == nil && p.Nspace != data.Job:
		return nil, false
	case p.Rank != pmix.RankWildcard && sp != nil:
		return []pmix.Proc{{Nspace: data.Job, Rank: sp.Ranks[0].Lo + p.Rank}}, true
	case p.Rank != pmix.RankWildcard || len(data.PMIx) == 0:
		return []pmix.Proc{{Nspace: data.Job, Rank: p.Rank}}, true
	}
	for _, pl := range data.Placement {
		for r := range pl.Ranks.All() {
			if spaceIn(data, r).ns == p.Nspace {
				ps = append(ps, pmix.Proc{Nspace: data.Job, Rank: r})
			}
		}
	}
	return ps, true
}

// pmixSpaceOf finds the namespace of rank of job from this daemon's job
// data (pushed before the ADD's launch).
func (d *Daemon) pmixSpaceOf(job string, rank uint32) pmixSpace {
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[job]
	if jc == nil {
		return pmixSpace{ns: job}
	}
	sp := spaceIn(&jc.data, rank)
	sp.data = jc.data
	return sp
}

// pmixProcOf is the PMIx name of rank of job.
func (d *Daemon) pmixProcOf(job string, rank uint32) pmix.Proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	var data *wire.JobData
	if jc := d.jobs[job]; jc != nil {
		data = &jc.data
	}
	return pmixName(data, job, rank)
}

// pmixDynrt turns PMIx processes into dynrt ones (dynrtOf) for the master,
// from the job data of this daemon's jobs. Processes of namespaces unknown
// here keep their names (a job of its own, spawned or connected).
func (d *Daemon) pmixDynrt(ps []pmix.Proc) []pmix.Proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]pmix.Proc, 0, len(ps))
	for _, p := range ps {
		found := false
		for _, jc := range d.jobs {
			if q, ok := dynrtOf(&jc.data, p); ok {
				out, found = append(out, q...), true
				break
			}
		}
		if !found {
			out = append(out, p)
		}
	}
	return out
}

// pmixFenceProcs names the participants of a fence over the whole
// namespace of j: nil (the whole job, as the master counts it) while the
// job has one namespace; once an ADD gave it more, the live ranks of j's
// namespace, since a namespace's fence is not the others'.
func (d *Daemon) pmixFenceProcs(j *pmixJob) []wire.ProcRanges {
	ps := d.pmixDynrt([]pmix.Proc{{Nspace: j.ns, Rank: pmix.RankWildcard}})
	if len(ps) == 1 && ps[0].Rank == pmix.RankWildcard {
		return nil
	}
	var rr wire.RankRanges
	for _, p := range ps {
		rr = rr.Add(p.Rank)
	}
	return []wire.ProcRanges{{Job: j.job, Ranks: rr}}
}

// describe is the PMIx description of an ADD's namespace: its ranks,
// renumbered from 0, on the nodes the job data places them.
func (sp pmixSpace) describe(b *wire.LaunchReq, node string) (*pmix.Job, error) {
	n := sp.ranks.Count()
	if n == 0 {
		return nil, fmt.Errorf("pmix: namespace %s of job %s has no ranks", sp.ns, b.Job)
	}
	j := &pmix.Job{Nspace: sp.ns, Size: uint32(n), Node: -1, RankNode: make([]int, n)}
	if b.PMI != nil && b.PMI.Universe > 0 {
		j.Universe = uint32(b.PMI.Universe)
	}
	at := map[string]int{} // node name → index in j.Nodes
	placed := 0
	for _, pl := range sp.data.Placement {
		for r := range pl.Ranks.All() {
			if !sp.ranks.Contains(r) {
				continue
			}
			i, ok := at[pl.Node]
			if !ok {
				i = len(j.Nodes)
				at[pl.Node] = i
				j.Nodes = append(j.Nodes, pl.Node)
			}
			j.RankNode[r-sp.base] = i
			placed++
		}
	}
	if placed != n {
		return nil, fmt.Errorf("pmix: the job data of %s places %d of the %d ranks %s of namespace %s", b.Job, placed, n, sp.ranks, sp.ns)
	}
	i, ok := at[node]
	if !ok {
		return nil, errors.New("pmix: node " + node + " is not in the placement of namespace " + sp.ns)
	}
	j.Node = i
	return j, nil
}

// confirm runs rc.confirm for a process an ADD started (its event
// DYNRT_PMIX_CONFIRM) and tells it the outcome with DYNRT_PMIX_ACCEPTED.
func (j *pmixJob) confirm(ev pmix.ClientEvent) {
	delta := j.desc.Dynrt.Delta
	for _, kv := range ev.Info {
		if kv.Key == pmix.KeyDynrtDelta {
			delta = kv.Value
		}
	}
	var rep *wire.RCAcceptReply
	var err error
	if delta == "" {
		err = wire.Errorf(wire.ErrInvalid, "daemon %s: a PMIx confirm (DYNRT_PMIX_CONFIRM) from %s, which no change started, names no change (%s)", j.svc.d.node, ev.Source, pmix.KeyDynrtDelta)
	} else {
		ctx, cancel := context.WithTimeout(j.ctx, acceptTimeout)
		rep, err = j.svc.d.rcConfirm(ctx, Caller{Job: j.job, Rank: j.base + ev.Source.Rank}, &wire.RCConfirmReq{Delta: delta})
		cancel()
	}
	j.svc.notify(pmix.Event{Status: pmix.CodeDynrtAccepted, Targets: []pmix.Proc{ev.Source}, Info: outcome(delta, rep, err)})
}

// outcome is the info of DYNRT_PMIX_ACCEPTED: the change, and its status
// and the set to continue with (if the change names one), or the error.
func outcome(delta string, rep *wire.RCAcceptReply, err error) []pmix.Info {
	info := []pmix.Info{{Key: pmix.KeyDynrtDelta, Value: delta}}
	if err != nil {
		return append(info, pmix.Info{Key: pmix.KeyDynrtError, Value: err.Error()})
	}
	info = append(info, pmix.Info{Key: pmix.KeyDynrtStatus, Value: rep.Status})
	if rep.Set.Name != "" {
		info = append(info, pmix.Info{Key: pmix.KeyDynrtBound, Value: rep.Set.Name})
	}
	return info
}

// newSet is phase 2 done by the daemon for the root of a PMIx job that
// accepts a change: the bound set's next version, as lib/session's
// SetAfter builds it: UNION(bound, delta) for an ADD, then
// DIFFERENCE(that, replaced set) for a REPLACE; DIFFERENCE(bound, delta)
// for a SUB (so that the set lists the processes that go on).
func (j *pmixJob) newSet(ctx context.Context, rank uint32, bound string, rec *wire.RC) (wire.PsetRef, error) {
	steps := [][2]string{{wire.OpUnion, rec.Delta}}
	if rec.Type == wire.RCSub {
		steps = [][2]string{{wire.OpDifference, rec.Delta}}
	}
	if rec.Type == wire.RCReplace {
		steps = append(steps, [2]string{wire.OpDifference, rec.OutSet})
	}
	var rep wire.PsetOpReply
	for _, st := range steps {
		err := j.svc.d.master.Call(ctx, wire.KindPsetOp, &wire.PsetOpReq{
			Job: j.job, Op: st[0], P1: bound, P2: st[1], Target: bound, Rank: rank,
		}, &rep)
		if err != nil {
			return wire.PsetRef{}, fmt.Errorf("daemon %s: %s(%s, %s) for the accept of rank %d: %w", j.svc.d.node, strings.ToUpper(st[0]), bound, st[1], rank, err)
		}
	}
	return wire.PsetRef{Name: rep.Name, Version: rep.Version}, nil
}
