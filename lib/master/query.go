package master

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/buildinfo"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

func (m *Master) handleState(ctx context.Context, _ *wire.Request, b *wire.DVMStateReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.DVMState, error)) {
		now := time.Now()
		st := &wire.DVMState{
			ID: s.id, PID: os.Getpid(), Started: s.started.UnixNano(), Uptime: int64(now.Sub(s.started)),
			Version: buildinfo.Read().Version, Launcher: s.m.launcherKind(), LauncherInfo: s.m.cfg.LauncherInfo,
		}
		st.Tree = s.treeState()
		usage := s.alloc.Usage()
		for i, n := range s.nodes {
			if !n.gone { // a node that left has no slots: the slot numbering skips it
				st.Nodes = append(st.Nodes, n.info(usage[i].Used))
			}
		}
		for _, j := range s.order {
			if !j.done || b.Ended {
				st.Jobs = append(st.Jobs, s.jobInfo(j, false))
			}
		}
		st.Slots = s.slotUse()
		st.NodeLog = slices.Clone(s.nodeLog)
		reply(st, nil)
	})
}

// slotUse lists the used slots, then the oversubscribed processes (slot
// -1), so dyntop can draw each process at its real cell.
func (s *state) slotUse() []wire.SlotUse {
	var out []wire.SlotUse
	for _, si := range s.alloc.SlotMap() {
		if si.Job != "" {
			out = append(out, wire.SlotUse{Slot: int32(si.Slot), Node: uint32(si.Node), Job: si.Job, Rank: si.Rank})
		}
	}
	for _, name := range s.alloc.Jobs() {
		for _, p := range s.alloc.Procs(name) {
			if p.Slot < 0 {
				out = append(out, wire.SlotUse{Slot: -1, Node: uint32(p.Node), Job: name, Rank: p.Rank})
			}
		}
	}
	return out
}

func (m *Master) handleJobState(ctx context.Context, _ *wire.Request, b *wire.JobStateReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.JobInfo, error)) {
		j, err := s.job(b.Job)
		if err != nil {
			reply(nil, err)
			return
		}
		in := s.jobInfo(j, b.Procs)
		reply(&in, nil)
	})
}

func (m *Master) handleJobList(ctx context.Context, _ *wire.Request, b *wire.JobListReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.JobList, error)) {
		l := &wire.JobList{}
		for _, j := range s.order {
			if !j.done || b.All {
				l.Jobs = append(l.Jobs, s.jobInfo(j, false))
			}
		}
		reply(l, nil)
	})
}

func (m *Master) handleStop(_ context.Context, _ *wire.Request, b *wire.DVMStopReq) (any, error) {
	grace := m.grace
	if b.GraceMS > 0 {
		grace = time.Duration(b.GraceMS) * time.Millisecond
	}
	m.stopAsync(grace)
	return nil, nil
}

// Tools ask the master about sets (application processes ask their
// daemon). mpi://SELF and mpi://SHARED name the caller's own processes and
// mean nothing to a tool.

func (s *state) psetJob(job string) (*job, error) {
	if job == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "master: which job's sets? (no job given)")
	}
	return s.job(job)
}

func (m *Master) handlePsetGet(ctx context.Context, _ *wire.Request, b *wire.PsetGetReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.PsetInfo, error)) {
		j, err := s.psetJob(b.Job)
		if err != nil {
			reply(nil, err)
			return
		}
		name := b.Name
		if b.Version != nil && !strings.Contains(name, "@") {
			name += "@" + uitoa(*b.Version)
		}
		in, err := refInfo(j.reg, j.ns, name, b.Members)
		reply(in, err)
	})
}

func (m *Master) handlePsetList(ctx context.Context, _ *wire.Request, b *wire.PsetListReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.PsetList, error)) {
		j, err := s.psetJob(b.Job)
		if err != nil {
			reply(nil, err)
			return
		}
		sets, err := latestSets(j, b.Members, func(in pset.Info) bool { return strings.HasPrefix(in.Name, b.Prefix) })
		reply(&wire.PsetList{Sets: sets}, err)
	})
}

// latestSets describes the latest version of every set of j that keep
// accepts, by name.
func latestSets(j *job, members bool, keep func(pset.Info) bool) ([]wire.PsetInfo, error) {
	var out []wire.PsetInfo
	for _, in := range j.reg.List() {
		if !keep(in) {
			continue
		}
		p, err := refInfo(j.reg, j.ns, in.Name+"@"+uitoa(uint32(in.Version)), members)
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// handlePsetQuery answers pset.query for tools as a daemon answers it for
// its processes (lib/daemon's handlePsetQuery), without mpi://SELF and
// mpi://SHARED, which name a caller's own processes: the exact versions
// asked for, then the latest version of every set holding Rank.
func (m *Master) handlePsetQuery(ctx context.Context, _ *wire.Request, b *wire.PsetQueryReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.PsetList, error)) {
		j, err := s.psetJob(b.Job)
		if err != nil {
			reply(nil, err)
			return
		}
		out := &wire.PsetList{}
		for _, ref := range b.Refs {
			p, err := refInfo(j.reg, j.ns, ref.Name+"@"+uitoa(ref.Version), b.Members)
			if err != nil {
				reply(nil, fmt.Errorf("pset.query: %w", err))
				return
			}
			out.Sets = append(out.Sets, *p)
		}
		if b.Rank != nil {
			holding, err := latestSets(j, b.Members, func(in pset.Info) bool {
				bm, err := j.reg.Bitmap(in.Name + "@" + uitoa(uint32(in.Version)))
				return err == nil && bm.Contains(*b.Rank)
			})
			if err != nil {
				reply(nil, err)
				return
			}
			out.Sets = append(out.Sets, holding...)
		}
		slices.SortStableFunc(out.Sets, func(a, b wire.PsetInfo) int {
			if c := strings.Compare(a.Name, b.Name); c != 0 {
				return c
			}
			return cmp.Compare(a.Version, b.Version)
		})
		reply(out, nil)
	})
}

// refInfo describes "name" or "name@version" of a registry for the wire.
func refInfo(r *pset.Registry, job, ref string, members bool) (*wire.PsetInfo, error) {
	in, err := r.Get(ref, pset.Latest)
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	out := &wire.PsetInfo{
		Name: in.Name, Job: job, Version: uint32(in.Version), Epoch: uint32(in.Epoch), Active: in.Active,
		Size: uint32(in.Size),
	}
	for k, v := range in.Sched {
		if out.Hints == nil {
			out.Hints = make(map[string]string, len(in.Sched))
		}
		out.Hints[strings.TrimPrefix(k, pset.SchedPrefix)] = v
	}
	if members {
		ms, err := r.Members(in.Name + "@" + uitoa(uint32(in.Version)))
		if err != nil {
			return nil, fmt.Errorf("master: %w", err)
		}
		out.Members = wire.RangesOf(ms)
	}
	return out, nil
}

func uitoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
