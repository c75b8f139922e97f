package master

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// sessState is the master's part of the session services (DESIGN §6):
// fences, groups and their context ids, the publish/lookup data, kv.fetch
// routing and the event subscriptions of daemons. Like *state it is only
// touched on the loop; the handlers reach it through ask/do/post.
//
// It learns about ended processes and jobs from the event bus (a
// subscription whose deliver runs on the loop), so the job code needs no
// hooks: a participant that ends before entering fails its fence or
// pending group, and a job's end drops its published data.
type sessState struct {
	m *Master

	fences       map[string][]*gather // open fence instances by key, oldest first
	pending      map[string]*gather   // group constructs in progress, by key
	groups       map[string]*group    // constructed groups, by key
	lastCID      uint64               // context id counter (ids start at 1, never reused)
	lastFenced   uint64               // fence instances whose data went as kv.fenced (wire.FenceData.Inst)
	treeFences   uint64               // ... of them down the tree (dvm status)
	fenceUp      uint64               // fence requests gathered up the tree (FenceReq.Parts)
	fenceUpParts uint64               // ... the daemons' entries they carried
	evOut        []*daemonSubs        // the daemons the event being published goes to (sendEvents)
	evRelays     int                  // events in flight down the tree
	treeEvents   uint64               // events sent down the tree (dvm status)
	pub          pubStore
	dsubs        map[*wire.Conn]*daemonSubs // event subscriptions of daemons
}

// sessionRoutes registers the session services: called once from routes.
func (m *Master) sessionRoutes() {
	ss := &sessState{
		m: m, fences: make(map[string][]*gather), pending: make(map[string]*gather),
		groups: make(map[string]*group), dsubs: make(map[*wire.Conn]*daemonSubs),
	}
	ss.pub.init()
	m.sess = ss
	wire.HandleTyped(m.daemonMux, wire.KindKVFetch, ss.handleFetch)
	wire.HandleTyped(m.daemonMux, wire.KindFence, ss.handleFence)
	wire.HandleTyped(m.daemonMux, wire.KindPublish, ss.handlePublish)
	wire.HandleTyped(m.daemonMux, wire.KindLookup, ss.handleLookup)
	wire.HandleTyped(m.daemonMux, wire.KindUnpublish, ss.handleUnpublish)
	wire.HandleTyped(m.daemonMux, wire.KindGroupConstruct, ss.handleGroupConstruct)
	wire.HandleTyped(m.daemonMux, wire.KindGroupDestruct, ss.handleGroupDestruct)
	wire.HandleTyped(m.daemonMux, wire.KindEventSub, ss.handleEventSub)
	wire.HandleTyped(m.daemonMux, wire.KindEventUnsub, ss.handleEventUnsub)
	wire.HandleTyped(m.daemonMux, wire.KindEventNotify, ss.handleEventNotify)
	m.post(func(s *state) {
		s.subscribe(&sub{kinds: []string{wire.EvProcState, wire.EvJobState}, deliver: func(ev *wire.Event) bool {
			ss.onEvent(s, ev)
			return true
		}}, 0)
	})
}

// onEvent runs on the loop for every process and job state change. It
// must not publish (it runs inside publish).
func (ss *sessState) onEvent(s *state, ev *wire.Event) {
	switch ev.Kind {
	case wire.EvProcState:
		switch ev.State {
		case wire.ProcStateExited, wire.ProcStateFailed, wire.ProcStateKilled:
			for r := range ev.Ranks.All() {
				ss.procEnded(procRef{ev.Job, r}, ev.State)
			}
		}
	case wire.EvJobState:
		switch ev.State {
		case wire.JobStateDone, wire.JobStateFailed, wire.JobStateKilled:
			ss.jobEnded(ev.Job)
		}
	}
}

// procEnded fails the fences the process was expected in and the pending
// groups it is a member of, takes it out of its groups, and removes the
// names it published to live as long as it.
func (ss *sessState) procEnded(p procRef, how string) {
	ss.pub.expire(p.job, p.rank, true)
	err := func(what string) error {
		return wire.Errorf(wire.ErrAborted, "master: %s: %s %s before entering", what, p, how)
	}
	for _, list := range ss.fences {
		for _, g := range slices.Clone(list) {
			if entered, ok := g.parts[p]; ok && !entered {
				ss.dropFence(g)
				g.fail(err(g.what))
			}
		}
	}
	// A group construct fails even when the process had entered it: the
	// group would hold a member that is gone, and the members still to
	// come may never come (they saw the loss first and went on to the set
	// after it), so the entered ones would wait for ever.
	for key, g := range ss.pending {
		if entered, ok := g.parts[p]; ok {
			delete(ss.pending, key)
			if entered {
				g.fail(wire.Errorf(wire.ErrAborted, "master: %s: %s %s after entering", g.what, p, how))
			} else {
				g.fail(err(g.what))
			}
		}
	}
	for key, gr := range ss.groups {
		if gr.leave(p) {
			delete(ss.groups, key)
		}
	}
}

// jobEnded drops what the session services kept for a job that has ended.
func (ss *sessState) jobEnded(job string) {
	ss.pub.dropJob(job)
	gone := wire.Errorf(wire.ErrAborted, "master: job %s has ended", job)
	for _, list := range ss.fences {
		for _, g := range slices.Clone(list) {
			if g.hasJob(job) {
				ss.dropFence(g)
				g.fail(gone)
			}
		}
	}
	for key, g := range ss.pending {
		if g.hasJob(job) {
			delete(ss.pending, key)
			g.fail(gone)
		}
	}
	for key, gr := range ss.groups {
		for p := range gr.members {
			if p.job == job && gr.leave(p) {
				delete(ss.groups, key)
			}
		}
	}
}

// procsLeaving takes the processes of job that a change is taking away
// (procLeaving) out of the open fences and group constructs over all of
// job's live processes that they have not entered: they will not enter,
// and their exit must not fail them. An instance they alone held back
// completes.
func (ss *sessState) procsLeaving(s *state, job string, ranks []uint32) {
	out := func(g *gather) bool {
		if !slices.Contains(g.wild, job) {
			return false
		}
		for _, r := range ranks {
			p := procRef{job, r}
			if entered, ok := g.parts[p]; ok && !entered {
				delete(g.parts, p)
				g.left--
			}
		}
		return g.left == 0 && len(g.entries) > 0
	}
	for _, list := range ss.fences {
		for _, g := range slices.Clone(list) {
			if out(g) {
				ss.dropFence(g)
				ss.completeFence(s, g)
			}
		}
	}
	for key, g := range ss.pending {
		if out(g) {
			delete(ss.pending, key)
			ss.completeGroup(s, key, g)
		}
	}
}

// procRef names a process of the DVM.
type procRef struct {
	job  string
	rank uint32
}

func (p procRef) String() string { return fmt.Sprintf("rank %d of job %s", p.rank, p.job) }

// procLive reports whether p has been launched and has not ended.
func (s *state) procLive(p procRef) bool {
	j := s.jobs[p.job]
	if j == nil || j.done || j.procs.at(p.rank) == nil {
		return false
	}
	switch j.procs.at(p.rank).state {
	case wire.ProcStateLaunching, wire.ProcStateRunning:
		return true
	}
	return false
}

// partSpec is the resolved process list of a fence or group.
type partSpec struct {
	key   string                     // canonical text: equal for equal lists however they were written (wire.CanonProcs)
	ranks map[string]wire.RankRanges // explicit ranks by job
	wild  []string                   // jobs named without ranks: every live process
}

// participants resolves the process list of a fence or group. Entries
// without a job mean the caller's job; an entry without ranks (or no
// entries at all) means every live process of that job. It does not
// expand that list (see members), so entering an existing instance costs
// no more than the list as written: its ranges, never its ranks (each
// daemon of a fence's job enters with the whole list).
func (s *state) participants(callerJob string, procs []wire.ProcRanges) (*partSpec, error) {
	spec, err := wire.CanonProcs(callerJob, procs)
	if err != nil {
		return nil, err
	}
	for _, job := range spec.Wild {
		if s.jobs[job] == nil {
			return nil, wire.Errorf(wire.ErrNotFound, "master: DVM %s has no job %q", s.id, job)
		}
	}
	for job, rs := range spec.Ranks {
		j := s.jobs[job]
		if j == nil {
			return nil, wire.Errorf(wire.ErrNotFound, "master: DVM %s has no job %q", s.id, job)
		}
		if last := rs[len(rs)-1].Hi; int(last) >= j.procs.len() {
			return nil, wire.Errorf(wire.ErrNotFound, "master: job %s has no rank %d", job, last)
		}
	}
	return &partSpec{key: spec.Key, ranks: spec.Ranks, wild: spec.Wild}, nil
}

// members expands ps into its processes (all not yet entered).
func (s *state) members(ps *partSpec) map[procRef]bool {
	members := map[procRef]bool{}
	for _, job := range ps.wild {
		s.jobs[job].procs.each(func(r uint32, _ *jproc) {
			if p := (procRef{job, r}); s.procLive(p) && !s.procLeaving(p) {
				members[p] = false
			}
		})
	}
	for job, rs := range ps.ranks {
		for r := range rs.All() {
			members[procRef{job, r}] = false
		}
	}
	return members
}

// gather is one instance of a collective operation (a fence or a group
// construct): it completes when every participant has entered and fails
// when one ends before entering.
type gather struct {
	key     string
	what    string           // for messages: `fence "x"`, `group "g"`
	parts   map[procRef]bool // participant → entered
	left    int              // participants not yet entered
	entries []*gentry        // one per request
	cid     uint64           // groups: the context id once complete
	done    bool
	wild    []string // jobs all of whose live processes take part (they leave out the leaving ones: procLeaving)
	job     string   // fences: the first entry\'s job and participant list (FenceData)
	procs   []wire.ProcRanges
	all     []wire.ProcKV // fences with collect: the collected data, made once (collectedOnce)
	answer  *sharedBody   // fences with collect: the reply, made for the first entry answered (fenceAnswer)
}

// gentry is one request waiting in a gather. Its fields other than who,
// data, conn and stores are set and read on the loop only.
type gentry struct {
	who    []procRef
	data   []wire.ProcKV // fences with collect: the entering processes' data
	conn   *wire.Conn    // fences: the entering daemon's connection
	stores bool          // fences with collect: the daemon takes the data down the tree (FenceReq.Stored)
	stored bool          // ... and has applied it: the answer says so instead of carrying it
	g      *gather
	finish func(g *gather, err error)
}

// newGather starts an instance over members; every member must be alive.
func (s *state) newGather(key, what string, members map[procRef]bool, wild []string) (*gather, error) {
	if len(members) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: %s has no live participants", what)
	}
	var dead []procRef
	for p := range members {
		if !s.procLive(p) {
			dead = append(dead, p)
		}
	}
	if len(dead) > 0 {
		slices.SortFunc(dead, cmpProc)
		return nil, wire.Errorf(wire.ErrAborted, "master: %s: %s has ended", what, dead[0])
	}
	return &gather{key: key, what: what, parts: members, left: len(members), wild: wild}, nil
}

func cmpProc(a, b procRef) int {
	if c := strings.Compare(a.job, b.job); c != 0 {
		return c
	}
	return int(a.rank) - int(b.rank)
}

func (g *gather) enteredAny(who []procRef) bool {
	for _, p := range who {
		if g.parts[p] {
			return true
		}
	}
	return false
}

func (g *gather) hasJob(job string) bool {
	for p := range g.parts {
		if p.job == job {
			return true
		}
	}
	return false
}

func (g *gather) enter(e *gentry) {
	for _, p := range e.who {
		g.parts[p] = true
		g.left--
	}
	e.g = g
	g.entries = append(g.entries, e)
}

// leave takes back an entry whose requester gave up (timeout).
func (g *gather) leave(e *gentry) {
	if g.done {
		return
	}
	i := slices.Index(g.entries, e)
	if i < 0 {
		return
	}
	g.entries = slices.Delete(g.entries, i, i+1)
	for _, p := range e.who {
		g.parts[p] = false
		g.left++
	}
}

func (g *gather) complete() {
	g.done = true
	for _, e := range g.entries {
		e.finish(g, nil)
	}
}

func (g *gather) fail(err error) {
	g.done = true
	for _, e := range g.entries {
		e.finish(g, err)
	}
}

// collected returns the data the entries brought, ordered by process.
func (g *gather) collected() []wire.ProcKV {
	var out []wire.ProcKV
	for _, e := range g.entries {
		out = append(out, e.data...)
	}
	slices.SortFunc(out, func(a, b wire.ProcKV) int { return cmpProc(procRef{a.Job, a.Rank}, procRef{b.Job, b.Rank}) })
	return out
}

// ctxTimeout bounds ctx by a request's timeout in ms (0 = no bound).
func ctxTimeout(ctx context.Context, ms int64) (context.Context, context.CancelFunc) {
	if ms > 0 {
		return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	}
	return context.WithCancel(ctx)
}
