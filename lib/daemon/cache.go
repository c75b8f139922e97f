package daemon

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// jobCache is the daemon's copy of what the master pushed about one job.
// It is guarded by Daemon.mu.
type jobCache struct {
	data  wire.JobData
	local wire.RankRanges     // ranks of the job on this node
	sets  map[string]*setHist // by canonical name
	rcs   *rcCache            // resource change records (rc.go)
	// pmiDead is the job's PMI_dead_processes (keep-going; pmi_job.go),
	// kept here because this entry exists from the launch's registration
	// on, before any rank of the node has attached to PMI.
	pmiDead string
}

// setHist holds the versions of a set pushed so far, oldest first.
type setHist struct {
	versions []wire.PsetInfo
	deleted  bool
}

func (h *setHist) latest() wire.PsetInfo { return h.versions[len(h.versions)-1] }

func (h *setHist) at(v uint32) (wire.PsetInfo, bool) {
	i, ok := slices.BinarySearchFunc(h.versions, v, func(p wire.PsetInfo, v uint32) int {
		switch {
		case p.Version < v:
			return -1
		case p.Version > v:
			return 1
		}
		return 0
	})
	if !ok {
		return wire.PsetInfo{}, false
	}
	return h.versions[i], true
}

func (h *setHist) add(p wire.PsetInfo) {
	h.deleted = false
	n := len(h.versions)
	if n == 0 || h.versions[n-1].Version < p.Version {
		h.versions = append(h.versions, p)
		return
	}
	for i := range h.versions {
		if h.versions[i].Version == p.Version {
			h.versions[i] = p // a re-push (new attributes) replaces the entry
			return
		}
		if h.versions[i].Version > p.Version {
			h.versions = slices.Insert(h.versions, i, p)
			return
		}
	}
}

// ensureJob returns the cache entry of job, creating a minimal one.
// d.mu must be held.
func (d *Daemon) ensureJob(job string, id uint32, app string) *jobCache {
	jc := d.jobs[job]
	if jc == nil {
		jc = &jobCache{data: wire.JobData{Job: job, ID: id, App: app}, sets: make(map[string]*setHist)}
		d.jobs[job] = jc
	}
	return jc
}

// cacheJob stores pushed job data and sets. Data with an older generation
// than the cached one is ignored (pushes may overtake each other). A push
// of sets alone for an unknown job returns nil. d.mu must be held.
func (d *Daemon) cacheJob(data *wire.JobData, push *wire.PsetPush) *jobCache {
	var jc *jobCache
	switch {
	case data != nil:
		jc = d.ensureJob(data.Job, data.ID, data.App)
		if data.Gen >= jc.data.Gen {
			jc.data = *data
			jc.data.Psets = nil // node.jobdata's sets are cached below, not kept twice
			jc.local = nil
			for _, pl := range data.Placement {
				if pl.Node == d.node {
					jc.local = pl.Ranks
				}
			}
		}
	case push != nil:
		jc = d.jobs[push.Job]
	}
	if jc == nil || push == nil {
		return jc
	}
	for _, p := range push.Defined {
		h := jc.sets[p.Name]
		if h == nil {
			h = &setHist{}
			jc.sets[p.Name] = h
		}
		if p.Job == "" {
			p.Job = jc.data.Job
		}
		h.add(p)
		if k := int(push.Keep); k > 0 && len(h.versions) > k {
			// The master keeps as many (its retention rule); older
			// versions are gone there too.
			drop := len(h.versions) - k
			clear(h.versions[:drop])
			h.versions = slices.Clone(h.versions[drop:])
		}
	}
	for _, name := range push.Deleted {
		if strings.HasPrefix(name, "mpi://rte/") {
			// A delta set is deleted only when the master forgets its
			// settled change: the record goes with it.
			delete(jc.sets, name)
			jc.rcs.forget(name)
			continue
		}
		if h := jc.sets[name]; h != nil {
			h.deleted = true
		}
	}
	return jc
}

// Caller is the process a client connection speaks for, as checked when
// it connected (see ClientName).
type Caller struct {
	Job  string
	Rank uint32
}

// CallerOf returns the caller behind a request that arrived on a client
// connection.
func CallerOf(req *wire.Request) (Caller, error) {
	return parseClientName(req.Conn.Peer().Name)
}

func parseClientName(name string) (Caller, error) {
	job, r, ok := strings.Cut(name, "/")
	rank, err := strconv.ParseUint(r, 10, 32)
	if !ok || job == "" || err != nil {
		return Caller{}, wire.Errorf(wire.ErrPermission, "daemon: client name %q is not <job>/<rank>", name)
	}
	return Caller{Job: job, Rank: uint32(rank)}, nil
}

// checkClient admits a client only if it claims a process of this node and
// is that process or runs in its process group.
func (d *Daemon) checkClient(h *wire.Hello, peer wire.PeerInfo) error {
	c, err := parseClientName(h.Name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	e := d.live[procKey{c.Job, c.Rank}]
	pid := 0
	if e != nil {
		pid = e.pid
	}
	d.mu.Unlock()
	if e == nil {
		return wire.Errorf(wire.ErrPermission, "daemon %s: no process %s runs here", d.node, h.Name)
	}
	if peer.PID <= 0 {
		return wire.Errorf(wire.ErrPermission, "daemon %s: cannot tell which process is connecting as %s", d.node, h.Name)
	}
	if pid == 0 {
		// Still forking. Any child of this daemon (a sibling rank) could
		// claim to be it until its pid is known, so wait for the pid.
		pid = d.forkedPid(procKey{c.Job, c.Rank}, forkWait)
		if pid == 0 {
			return wire.Errorf(wire.ErrPermission, "daemon %s: process %s is not started (yet)", d.node, h.Name)
		}
	}
	switch {
	case peer.PID == pid:
		return nil
	default:
		if g, err := syscall.Getpgid(peer.PID); err == nil && g == pid {
			return nil
		}
	}
	return wire.Errorf(wire.ErrPermission, "daemon %s: pid %d is not process %s", d.node, peer.PID, h.Name)
}

// forkWait bounds how long a client's hello waits for the fork of the
// process it claims to be (a fork takes milliseconds).
const forkWait = 5 * time.Second

// forkedPid waits up to limit for the pid of k's process: 0 when the
// entry is gone (the fork failed) or the wait ran out.
func (d *Daemon) forkedPid(k procKey, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		d.mu.Lock()
		e := d.live[k]
		pid := 0
		if e != nil {
			pid = e.pid
		}
		d.mu.Unlock()
		if pid != 0 || e == nil || time.Now().After(deadline) {
			return pid
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// seenBy is the job's size and its ranks on this node as the process of
// rank sees them. The data shows the job after the change in flight, if
// any (wire.JobData.Pending); until that change is FINALIZED, a process
// it does not start still belongs to the job before it: the ranks the
// change removes count, the ones it adds do not. d.mu must be held.
func (d *Daemon) seenBy(jc *jobCache, rank uint32) (uint32, wire.RankRanges) {
	data := &jc.data
	if data.Pending == "" || data.Adding.Contains(rank) {
		return data.Size, jc.local
	}
	if jc.rcs != nil {
		if rec := jc.rcs.byDelta[data.Pending]; rec != nil && rec.Status == wire.RCFinalized {
			return data.Size, jc.local
		}
	}
	size := int(data.Size) - data.Adding.Count() + data.Leaving.Count()
	return uint32(max(size, 0)), jc.local.Minus(data.Adding).Union(d.leavingHere(jc))
}

// leavingHere are the ranks of the data's Leaving that run on this node.
// d.mu must be held.
func (d *Daemon) leavingHere(jc *jobCache) wire.RankRanges {
	var out wire.RankRanges
	for r := range jc.data.Leaving.All() {
		if d.live[procKey{jc.data.Job, r}] != nil {
			out = out.Add(r)
		}
	}
	return out
}

func (d *Daemon) handleSessionInit(_ context.Context, req *wire.Request, b *wire.SessionInitReq) (any, error) {
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	if (b.Job != "" && b.Job != c.Job) || (b.Job != "" && b.Rank != c.Rank) {
		return nil, wire.Errorf(wire.ErrPermission, "daemon %s: connection of %s cannot open a session as %s", d.node, procenv.ClientName(c.Job, c.Rank), procenv.ClientName(b.Job, b.Rank))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[c.Job]
	if jc == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: job %s is not known here", d.node, c.Job)
	}
	size, local := jc.data.Size, jc.local
	if !b.Latest {
		size, local = d.seenBy(jc, c.Rank)
	}
	info := &wire.SessionInfo{
		Job: c.Job, App: jc.data.App, Rank: c.Rank, UID: wire.ProcUID(jc.data.ID, c.Rank),
		Size: size, Node: d.node, LocalPeers: local, DVM: d.dvm,
		Delta: jc.launchDelta(c.Rank), // the ADD that started it (rc.go)
	}
	for r := range local.All() {
		if r == c.Rank {
			break
		}
		info.LocalRank++
	}
	return info, nil
}

func (d *Daemon) handleSessionFin(_ context.Context, req *wire.Request, _ *wire.SessionFinReq) (any, error) {
	_, err := CallerOf(req)
	return nil, err
}

// localSet describes SELF or SHARED for the caller; ok=false for other
// names.
func (d *Daemon) localSet(kind pset.Kind, c Caller, jc *jobCache) (wire.PsetInfo, bool) {
	switch kind {
	case pset.KindSelf:
		return wire.PsetInfo{Name: pset.NameSelf, Job: c.Job, Active: true, Size: 1, Members: wire.Span(c.Rank, c.Rank)}, true
	case pset.KindShared:
		// The caller's peers as it sees the job (seenBy): during a change,
		// a process the change removes still shares the node.
		_, local := d.seenBy(jc, c.Rank)
		return wire.PsetInfo{Name: pset.NameShared, Job: c.Job, Active: true, Size: uint32(local.Count()), Members: local}, true
	}
	return wire.PsetInfo{}, false
}

func withMembers(p wire.PsetInfo, members bool) wire.PsetInfo {
	if !members {
		p.Members = nil
	}
	return p
}

// elsewhere reports whether a set query is about another job than the
// caller's that this daemon does not hold: the master pushes a job only to
// the daemons of its nodes (most jobs), so the master answers it.
func (d *Daemon) elsewhere(req *wire.Request, job string) bool {
	c, err := CallerOf(req)
	if err != nil || job == "" || job == c.Job {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.jobs[job] == nil
}

// queryJob resolves the job a set query is about (the caller's by
// default). d.mu must be held.
func (d *Daemon) queryJob(req *wire.Request, job string) (Caller, *jobCache, error) {
	c, err := CallerOf(req)
	if err != nil {
		return c, nil, err
	}
	if job == "" {
		job = c.Job
	}
	jc := d.jobs[job]
	if jc == nil {
		return c, nil, wire.Errorf(wire.ErrNotFound, "daemon %s: job %s is not known here", d.node, job)
	}
	return c, jc, nil
}

func (d *Daemon) handlePsetGet(ctx context.Context, req *wire.Request, b *wire.PsetGetReq) (any, error) {
	if d.elsewhere(req, b.Job) {
		return d.Relay(ctx, wire.KindPsetGet, b)
	}
	n, v, err := pset.ParseRef(b.Name)
	if err != nil {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon: pset.get: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c, jc, err := d.queryJob(req, b.Job)
	if err != nil {
		return nil, err
	}
	if n.Kind == pset.KindSelf || n.Kind == pset.KindShared {
		if jc.data.Job != c.Job {
			return nil, wire.Errorf(wire.ErrInvalid, "daemon: %s names the caller's own processes, not those of job %s", n, jc.data.Job)
		}
		p, _ := d.localSet(n.Kind, c, jc)
		return withMembers(p, b.Members), nil
	}
	name := n.String()
	h := jc.sets[name]
	if h == nil || len(h.versions) == 0 {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon: job %s has no process set %s", jc.data.Job, name)
	}
	if b.Version != nil {
		v = int(*b.Version)
	}
	if v == pset.Latest {
		if h.deleted {
			return nil, wire.Errorf(wire.ErrNotFound, "daemon: process set %s of job %s was deleted", name, jc.data.Job)
		}
		return withMembers(h.latest(), b.Members), nil
	}
	p, ok := h.at(uint32(v))
	if !ok {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon: process set %s of job %s has no version %d here", name, jc.data.Job, v)
	}
	return withMembers(p, b.Members), nil
}

func (d *Daemon) handlePsetList(ctx context.Context, req *wire.Request, b *wire.PsetListReq) (any, error) {
	if d.elsewhere(req, b.Job) {
		return d.Relay(ctx, wire.KindPsetList, b)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c, jc, err := d.queryJob(req, b.Job)
	if err != nil {
		return nil, err
	}
	out := &wire.PsetList{Sets: jc.latestSets(b.Prefix, b.Deleted, b.Members)}
	if jc.data.Job == c.Job {
		for _, k := range []pset.Kind{pset.KindSelf, pset.KindShared} {
			if p, _ := d.localSet(k, c, jc); strings.HasPrefix(p.Name, b.Prefix) {
				out.Sets = append(out.Sets, withMembers(p, b.Members))
			}
		}
	}
	sortSets(out.Sets)
	return out, nil
}

func (d *Daemon) handlePsetQuery(ctx context.Context, req *wire.Request, b *wire.PsetQueryReq) (any, error) {
	if d.elsewhere(req, b.Job) {
		return d.Relay(ctx, wire.KindPsetQuery, b)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c, jc, err := d.queryJob(req, b.Job)
	if err != nil {
		return nil, err
	}
	out := &wire.PsetList{}
	for _, ref := range b.Refs {
		n, err := pset.Parse(ref.Name)
		if err != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "daemon: pset.query: %w", err)
		}
		if p, ok := d.localSet(n.Kind, c, jc); ok && jc.data.Job == c.Job {
			out.Sets = append(out.Sets, withMembers(p, b.Members))
			continue
		}
		h := jc.sets[n.String()]
		var p wire.PsetInfo
		ok := h != nil
		if ok {
			p, ok = h.at(ref.Version)
		}
		if !ok {
			return nil, wire.Errorf(wire.ErrNotFound, "daemon: process set %s@%d of job %s is not known here", n, ref.Version, jc.data.Job)
		}
		out.Sets = append(out.Sets, withMembers(p, b.Members))
	}
	if b.Rank != nil {
		r := *b.Rank
		for _, h := range jc.sets {
			if len(h.versions) > 0 && !h.deleted && h.latest().Members.Contains(r) {
				out.Sets = append(out.Sets, withMembers(h.latest(), b.Members))
			}
		}
		if jc.data.Job == c.Job {
			if r == c.Rank {
				p, _ := d.localSet(pset.KindSelf, c, jc)
				out.Sets = append(out.Sets, withMembers(p, b.Members))
			}
			if p, _ := d.localSet(pset.KindShared, c, jc); p.Members.Contains(c.Rank) && p.Members.Contains(r) {
				out.Sets = append(out.Sets, withMembers(p, b.Members))
			}
		}
	}
	sortSets(out.Sets)
	return out, nil
}

// latestSets returns the latest version of the job's sets whose names
// start with prefix (deleted ones too if asked), sorted by name. d.mu
// must be held.
func (jc *jobCache) latestSets(prefix string, deleted, members bool) []wire.PsetInfo {
	var out []wire.PsetInfo
	for name, h := range jc.sets {
		if len(h.versions) == 0 || (h.deleted && !deleted) || !strings.HasPrefix(name, prefix) {
			continue
		}
		out = append(out, withMembers(h.latest(), members))
	}
	sortSets(out)
	return out
}

func sortSets(s []wire.PsetInfo) {
	slices.SortFunc(s, func(a, b wire.PsetInfo) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Version) - int(b.Version)
	})
}

// applyJobDelta turns a delta of job data (wire.JobData.Delta) into the
// whole data, from the generation it applies to, which this daemon must
// have: the master sends a delta only to a daemon it sent that
// generation. d.mu must be held.
func (d *Daemon) applyJobDelta(b *wire.JobData) (*wire.JobData, error) {
	jc := d.jobs[b.Job]
	if jc == nil || jc.data.Gen != b.Base {
		have := "none"
		if jc != nil {
			have = strconv.FormatUint(jc.data.Gen, 10)
		}
		return nil, wire.Errorf(wire.ErrState, "daemon %s: job data of %s: a change from generation %d, but this node has %s", d.node, b.Job, b.Base, have)
	}
	full := jc.data.Apply(b)
	return &full, nil
}
