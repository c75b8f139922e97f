package daemon

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/wire"
)

// JobControl serves PMIx_Job_control of a process of the job: the master
// kills or signals the targets (a job of the caller's spawn tree, whole
// or some of its ranks), as dynrt's own kill does.
func (j *pmixJob) JobControl(p pmix.Proc, targets []pmix.Proc, ctl pmix.JobCtl, done func()) {
	defer done()
	req := &wire.PMIJobCtl{Job: j.job, Rank: j.base + p.Rank, Procs: procRanges(j.svc.d.pmixDynrt(targets))}
	if !ctl.Kill {
		req.Signal = ctl.Signal
	}
	ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
	defer cancel()
	if err := j.svc.d.master.Call(ctx, wire.KindPMIJobCtl, req, nil); err != nil {
		// The process was told its request was accepted (lib/pmix).
		j.svc.d.log.Warn("daemon: PMIx job control refused", "proc", p.String(), "targets", targets, "err", err)
	}
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

// Resource changes through PMIx (docs/mpi.md): a process that sends
// DYNRT_PMIX_MALLEABLE to its daemon is told of every change of its job
// by PMIx events (announce), and the root of a bound set accepts a change
// with DYNRT_PMIX_ACCEPT, answered with DYNRT_PMIX_ACCEPTED. The master
// allows changes of a PMIx job only once every live process declared
// itself.

// acceptTimeout bounds a PMIx process's accept (the alone form does not
// wait for other processes).
const acceptTimeout = 30 * time.Second

// ClientEvent handles the events a process of the job addresses to its
// daemon; others are left to libpmix.
func (j *pmixJob) ClientEvent(ev pmix.ClientEvent) {
	switch ev.Status {
	case pmix.CodeDynrtMalleable:
		if xp := j.proc(ev.Source.Rank); xp != nil {
			xp.mu.Lock()
			xp.malleable = true
			xp.mu.Unlock()
		}
		j.svc.d.pmi.report(procKey{j.job, j.base + ev.Source.Rank}, wire.PMIReportMalleable, "")
	case pmix.CodeDynrtAccept:
		j.accept(ev)
	case pmix.CodeDynrtConfirm:
		j.confirm(ev) // pmix_space.go
	}
}

// accept runs the alone form of rc.accept for the root that sent ev and
// tells it the outcome. The daemon first builds the set the members
// continue with (newSet), as lib/session's SetAfter does.
func (j *pmixJob) accept(ev pmix.ClientEvent) {
	req := &wire.RCAcceptReq{Alone: true}
	for _, kv := range ev.Info {
		switch kv.Key {
		case pmix.KeyDynrtDelta:
			req.Delta = kv.Value
		case pmix.KeyDynrtBound:
			req.Bound = kv.Value
		}
	}
	var rep *wire.RCAcceptReply
	var err error
	c := Caller{Job: j.job, Rank: j.base + ev.Source.Rank}
	if req.Delta == "" {
		err = wire.Errorf(wire.ErrInvalid, "daemon %s: a PMIx accept (DYNRT_PMIX_ACCEPT) without %s names no change", j.svc.d.node, pmix.KeyDynrtDelta)
	} else {
		ctx, cancel := context.WithTimeout(j.ctx, acceptTimeout)
		if rec, bound := j.svc.d.rcOf(j.job, req.Delta, req.Bound); rec != nil && bound != "" {
			req.Set, err = j.newSet(ctx, c.Rank, bound, rec) // pmix_space.go
		}
		if err == nil {
			rep, err = j.svc.d.rcAccept(ctx, c, req)
		}
		cancel()
	}
	j.svc.notify(pmix.Event{Status: pmix.CodeDynrtAccepted, Targets: []pmix.Proc{ev.Source}, Info: outcome(req.Delta, rep, err)})
}

// rcOf returns the change delta of job as this daemon knows it (a copy),
// and the bound set an accept speaks for (bound, or the change's only
// one); nil when unknown (the accept then says why).
func (d *Daemon) rcOf(job, delta, bound string) (*wire.RC, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[job]
	if jc == nil || jc.rcs == nil || jc.rcs.byDelta[delta] == nil {
		return nil, ""
	}
	rec := *jc.rcs.byDelta[delta]
	if bound == "" && len(rec.Bound) == 1 {
		bound = rec.Bound[0]
	}
	return &rec, bound
}

// notify sends ev, logging a failure (the processes then miss it, as
// they would miss a lost message).
func (svc *pmixService) notify(ev pmix.Event) {
	svc.mu.Lock()
	srv := svc.srv
	svc.mu.Unlock()
	if srv == nil {
		return
	}
	if err := srv.Notify(ev); err != nil {
		svc.d.log.Warn("daemon: PMIx event not sent", "code", ev.Status, "to", ev.Targets, "err", err)
	}
}

// announce tells the job's local processes that declared themselves
// malleable of a change: its delta set when it is new
// (PMIX_PROCESS_SET_DEFINE), and its status (DYNRT_PMIX_RC). Called with
// d.mu held, in the order of the pushes, so the events keep that order
// (Notify only queues them in libpmix).
//
// The new processes of an ADD are not told of it: they find it in their
// namespace's job info and confirm it (pmix_space.go); every process is
// named by its PMIx name (its namespace and rank there).
func (svc *pmixService) announce(rec *wire.RC, isNew bool) {
	joiners := rec.Type == wire.RCAdd || rec.Type == wire.RCReplace
	svc.mu.Lock()
	var targets []pmix.Proc
	for k, xp := range svc.procs {
		if k.job != rec.Job || (joiners && rec.Ranks.Contains(k.rank)) {
			continue
		}
		xp.mu.Lock()
		if xp.malleable && !xp.finalized {
			targets = append(targets, pmix.Proc{Nspace: xp.job.ns, Rank: k.rank - xp.job.base})
		}
		xp.mu.Unlock()
	}
	svc.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	slices.SortFunc(targets, func(a, b pmix.Proc) int {
		return cmp.Or(strings.Compare(a.Nspace, b.Nspace), cmp.Compare(a.Rank, b.Rank))
	})
	var data *wire.JobData
	if jc := svc.d.jobs[rec.Job]; jc != nil { // d.mu is held
		data = &jc.data
	}
	var delta []pmix.Proc
	for r := range rec.Ranks.All() {
		delta = append(delta, pmixNameIn(data, rec.Job, rec.Delta, r))
	}
	if isNew {
		svc.notify(pmix.Event{Status: pmix.CodeProcessSetDefine, Targets: targets, Info: []pmix.Info{
			{Key: pmix.KeyPsetName, Value: rec.Delta}, {Key: pmix.KeyPsetMembers, Value: delta},
		}})
	}
	info := []pmix.Info{
		{Key: pmix.KeyDynrtType, Value: rec.Type}, {Key: pmix.KeyDynrtStatus, Value: rec.Status},
		{Key: pmix.KeyDynrtDelta, Value: rec.Delta}, {Key: pmix.KeyDynrtBound, Value: strings.Join(rec.Bound, ",")},
	}
	if len(rec.Out) > 0 {
		var out []pmix.Proc
		for r := range rec.Out.All() {
			out = append(out, pmixName(data, rec.Job, r))
		}
		info = append(info, pmix.Info{Key: pmix.KeyDynrtOut, Value: out})
	}
	if rec.Status == wire.RCAborted {
		info = append(info, pmix.Info{Key: pmix.KeyDynrtError, Value: rec.Reason})
	}
	svc.notify(pmix.Event{Status: pmix.CodeDynrtRC, Targets: targets, Affected: delta, Info: info})
}
