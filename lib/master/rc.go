package master

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/rc"
	"github.com/dynrt/dynrt/wire"
)

// Resource changes (DESIGN §5, thesis §6.2–6.4). Everything here runs on
// the loop; calls to daemons go through the ordered push queues of
// psetop.go (one FIFO per node) or, for launches and kills, through
// goroutines that post back.
//
// The life of a change (an rcRun):
//
//	request   validate, choose slots (ADD: alloc.Allocate with the job's
//	          map-by) or victims (SUB: highest slots, or the named ranks),
//	          number it (rc.Tracker) and define the delta set in the job's
//	          registry; ADD processes enter the job table as "launching"
//	defined   the delta set reached every daemon (pset.push, acked)
//	job data  the job as it is after the change reached every daemon
//	announced status ANNOUNCED; the record reached every daemon (rc.push),
//	          then the event; ADD: node.launch of the new processes
//	accept    the root of a bound set accepts (rc.accept): PENDING, and the
//	          master publishes <delta>:accept; SUB: FINALIZED after one
//	          accept per set of X_c(U)
//	confirm   ADD: one new process confirms (rc.confirm): FINALIZED and
//	          <delta>:confirm published
//	settled   ADD: FINALIZED and every new process started; SUB: FINALIZED
//	          and every removed process gone (after the grace period they
//	          are killed), slots freed, inactive sets updated, job data
//	          pushed; ABORTED: the new processes of an ADD gone and their
//	          slots freed, job data reverted
//
// A job has at most one change that is not settled; another request gets
// wire.ErrBusy naming it or, with Queue, waits for it. Every update of a
// record is pushed to every daemon before its rc.state event is published,
// so a process that sees the event finds the same record in its daemon.

// Defaults of the timers of a change.
const (
	// DefaultRCConfirmTimeout bounds the time from the announcement until
	// an ADD is FINALIZED (or a SUB got its first accept); then the change
	// is ABORTED.
	DefaultRCConfirmTimeout = 30 * time.Second
	// DefaultRCGrace is how long the removed processes of a FINALIZED SUB
	// have to exit before the runtime kills them.
	DefaultRCGrace = 5 * time.Second
)

// rcState is the master's resource-change state (a field of *state).
type rcState struct {
	jobs                 map[string]*jobRC // by job namespace
	queues               map[int]*pushq    // ordered pushes per node index (psetop.go)
	psetSeq              uint64            // PsetPush.Seq counter
	relaySeq             uint64            // NodeRelay.Seq counter (tree.go)
	treeSent, treeResent uint64            // TreeStats
	// flights are the relays down the tree not yet settled at every node
	// (tree.go): a node that becomes suspect has its subtree in each of
	// them sent to directly (relayStalled).
	flights map[*relayFlight]struct{}
}

// jobRC holds the changes of one job.
type jobRC struct {
	s     *state // for node names in records (loop-owned like everything here)
	j     *job
	tr    *rc.Tracker
	runs  map[string]*rcRun // by delta name
	order []*rcRun
	cur   *rcRun       // the change not yet settled, if any
	queue []*rcPending // requests waiting for cur (Queue)

	lost       []lostRank // shrink policy: lost ranks waiting for their failure SUB (failure.go)
	lossPosted bool       // a start of the failure SUB is posted
}

// rcPending is a queued request.
type rcPending struct {
	req   wire.RCRequest
	at    time.Time
	reply func(*wire.RC, error)
}

// rcRun is one change and everything the master does for it.
type rcRun struct {
	dataSent  bool // the job's data with this change is queued to the daemons (an abort must send it again)
	jr        *jobRC
	r         *rc.RC
	req       wire.RCRequest
	typ       string // wire.RCAdd, wire.RCSub or wire.RCReplace
	ranks     []uint32
	delta     wire.RankRanges
	out       []uint32        // REPLACE: the processes replaced (rc_replace.go)
	outRR     wire.RankRanges // the same as ranges
	outSet    string          // their set, mpi://rte/<app>/rc/<n>/out
	bound     []string
	refs      []wire.PsetRef             // bound sets at the announcement
	bmem      map[string]wire.RankRanges // their members then
	procs     []alloc.Proc               // ADD: the new processes
	snap      pset.Snapshot              // which sets held the delta's ranks before the change (an abort restores it)
	endedAt   []wire.ProcInfo            // aborted ADD: how its processes ended, kept when its ranks are given back
	placement []wire.Placement           // where the delta's processes run
	lost      []lostRank                 // a failure change (Cause): the lost ranks it removes or replaces, and how each ended
	newFailed string                     // a failure REPLACE: how its new processes failed (failure.go rcRefold)
	held      map[uint32][]string        // the malleable sets that held each of the change's ranks before it (phase 2 may take them out)

	seq        uint64 // record updates pushed
	shown      string // status of the last rc.state event (rcEvent)
	placed     time.Time
	launched   time.Time
	exited     time.Time
	newSet     *wire.PsetRef           // ADD: the set the accept named
	sets       map[string]wire.PsetRef // the set each bound set's accept named
	pinned     bool
	leftFences bool // the leaving processes were taken out of the open fences (procsLeaving)
	launching  bool // ADD: the launch round is in flight
	launchEnd  bool // ADD: the launch round completed (or was never needed)
	started    int  // ADD: new processes reported forked
	gone       map[uint32]bool
	timer      *time.Timer // confirm timeout, then (SUB) the grace period
	settled    bool

	announced func(*wire.RC, error)   // requester without Wait: answered at ANNOUNCED
	waiters   []func(*wire.RC, error) // requesters with Wait: answered when settled
	blocked   []rcBlocked             // blocking accepts waiting for the end
}

type rcBlocked struct {
	key   string // decision key to publish with the answer
	bound string
	owner procRef
	term  bool
	reply func(*wire.RCAcceptReply, error)
}

func (s *state) rcs() *rcState {
	if s.rc == nil {
		s.rc = &rcState{jobs: make(map[string]*jobRC), queues: make(map[int]*pushq)}
	}
	return s.rc
}

// jobRC returns the change record of j, creating it.
func (s *state) jobRC(j *job) *jobRC {
	st := s.rcs()
	if jr := st.jobs[j.ns]; jr != nil {
		return jr
	}
	// Forget the changes of jobs the master itself has forgotten.
	for ns := range st.jobs {
		if s.jobs[ns] == nil {
			delete(st.jobs, ns)
		}
	}
	jr := &jobRC{
		s: s, j: j, runs: make(map[string]*rcRun),
		tr: rc.NewTracker(j.app, rc.TrackerOptions{Name: func(app string, n int) string {
			return pset.DeltaName(app, uint64(n)+1) // the registry numbers delta sets from 1
		}}),
	}
	st.jobs[j.ns] = jr
	return jr
}

// rcJob resolves the job of a request: a namespace, an application name
// (of a live job) or, when empty, the only live job.
func (s *state) rcJob(name string) (*job, error) {
	if name == "" {
		var live []*job
		for _, j := range s.order {
			if !j.done {
				live = append(live, j)
			}
		}
		switch len(live) {
		case 1:
			return live[0], nil
		case 0:
			return nil, wire.Errorf(wire.ErrNotFound, "master: DVM %s runs no job", s.id)
		}
		return nil, wire.Errorf(wire.ErrInvalid, "master: DVM %s runs %d jobs; say which", s.id, len(live))
	}
	if j := s.jobs[name]; j != nil {
		return j, nil
	}
	for i := len(s.order) - 1; i >= 0; i-- {
		if j := s.order[i]; j.app == name && !j.done {
			return j, nil
		}
	}
	for i := len(s.order) - 1; i >= 0; i-- {
		if j := s.order[i]; j.app == name {
			return j, nil
		}
	}
	return nil, wire.Errorf(wire.ErrNotFound, "master: DVM %s has no job %q", s.id, name)
}

// rcFind returns the change named by delta (of job, when given).
func (s *state) rcFind(jobName, delta string) (*rcRun, error) {
	n, err := pset.Parse(delta)
	if err != nil {
		return nil, err
	}
	if n.Kind != pset.KindDelta {
		return nil, wire.Errorf(wire.ErrInvalid, "master: %s is not a delta set (mpi://rte/<app>/rc/<n>)", delta)
	}
	key := n.String()
	var cands []*job
	if jobName != "" {
		j, err := s.rcJob(jobName)
		if err != nil {
			return nil, err
		}
		cands = []*job{j}
	} else {
		for i := len(s.order) - 1; i >= 0; i-- {
			if s.order[i].app == n.App {
				cands = append(cands, s.order[i])
			}
		}
	}
	for _, j := range cands {
		if jr := s.rcs().jobs[j.ns]; jr != nil {
			if run := jr.runs[key]; run != nil {
				return run, nil
			}
		}
	}
	for _, j := range cands {
		if _, err := j.reg.Get(key, pset.Latest); err != nil && strings.Contains(err.Error(), "forgotten") {
			return nil, wire.Errorf(wire.ErrNotFound, "master: resource change %s of job %s settled and was forgotten: a job keeps its latest %d (history-changes, docs/limits.md)",
				key, j.app, s.m.cfg.Limits.Normalize().HistoryChanges)
		}
	}
	return nil, wire.Errorf(wire.ErrNotFound, "master: no resource change %s", key)
}

// rcDelta names the change of j in flight ("" if none), for JobInfo.
func (s *state) rcDelta(j *job) string {
	if s.rc == nil {
		return ""
	}
	if jr := s.rc.jobs[j.ns]; jr != nil && jr.cur != nil {
		return jr.cur.r.Delta()
	}
	return ""
}

func parseRCType(t string) (string, error) {
	switch strings.ToUpper(t) {
	case wire.RCAdd:
		return wire.RCAdd, nil
	case wire.RCSub:
		return wire.RCSub, nil
	case wire.RCReplace:
		return wire.RCReplace, nil
	}
	return "", wire.Errorf(wire.ErrInvalid, "master: resource change type %q: want ADD, SUB or REPLACE", t)
}

// requester converts the wire requester of a change.
func requester(b *wire.RCRequest) rc.Requester {
	r := rc.Requester{Kind: rc.ByTool, Name: b.RequesterID}
	switch b.Requester {
	case wire.ByApp:
		r.Kind = rc.ByApp
		if n, err := strconv.ParseUint(strings.TrimPrefix(b.RequesterID, "rank "), 10, 32); err == nil {
			r.Rank = uint32(n)
		}
	case wire.BySched:
		r.Kind = rc.ByScheduler
	case wire.ByRuntime:
		r.Kind = rc.ByRuntime
	}
	return r
}

// rcRoutes registers the resource change and process set operation
// requests: called once from routes.
func (m *Master) rcRoutes() {
	wire.HandleTyped(m.toolMux, wire.KindRCRequest, m.handleRCRequest)
	wire.HandleTyped(m.toolMux, wire.KindRCQuery, m.handleRCQuery)
	wire.HandleTyped(m.toolMux, wire.KindRCList, m.handleRCList)
	wire.HandleTyped(m.toolMux, wire.KindRCCancel, m.handleRCCancel)
	wire.HandleTyped(m.toolMux, wire.KindPsetOp, m.handlePsetOpTool)
	wire.HandleTyped(m.toolMux, wire.KindPsetDelete, m.handlePsetDelete)

	// Relayed by daemons for their processes (job and rank stamped).
	wire.HandleTyped(m.daemonMux, wire.KindRCRequest, m.handleRCRequestApp)
	wire.HandleTyped(m.daemonMux, wire.KindRCQuery, m.handleRCQuery)
	wire.HandleTyped(m.daemonMux, wire.KindRCAccept, m.handleRCAccept)
	wire.HandleTyped(m.daemonMux, wire.KindRCConfirm, m.handleRCConfirm)
	wire.HandleTyped(m.daemonMux, wire.KindPsetOp, m.handlePsetOpApp)
	wire.HandleTyped(m.daemonMux, wire.KindPsetDelete, m.handlePsetDelete)
	wire.HandleTyped(m.daemonMux, wire.KindRCCancel, m.handleRCCancelApp)
}

// Handlers.

func (m *Master) handleRCRequest(ctx context.Context, req *wire.Request, b *wire.RCRequest) (any, error) {
	switch b.Requester {
	case "":
		b.Requester = wire.ByTool
	case wire.ByTool, wire.BySched:
	default:
		return nil, wire.Errorf(wire.ErrInvalid, "master: a tool may ask as %q or %q, not %q", wire.ByTool, wire.BySched, b.Requester)
	}
	if b.RequesterID == "" {
		b.RequesterID = req.Conn.Peer().String()
	}
	return m.rcRequest(ctx, b)
}

// handleRCRequestApp serves rc.request relayed by a daemon for one of its
// processes (evolving jobs): the daemon stamped the job and the rank.
func (m *Master) handleRCRequestApp(ctx context.Context, _ *wire.Request, b *wire.RCRequest) (any, error) {
	b.Requester = wire.ByApp
	return m.rcRequest(ctx, b)
}

func (m *Master) rcRequest(ctx context.Context, b *wire.RCRequest) (any, error) {
	if b.Wait && b.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(b.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	at := time.Now()
	return ask(ctx, m, func(s *state, reply func(*wire.RC, error)) { s.rcSubmit(b, at, reply) })
}

func (m *Master) handleRCQuery(ctx context.Context, _ *wire.Request, b *wire.RCQueryReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.RCQueryReply, error)) {
		if b.Delta != "" {
			run, err := s.rcFind(b.Job, b.Delta)
			if err != nil {
				reply(nil, err)
				return
			}
			rec := run.record()
			reply(&wire.RCQueryReply{RC: &rec, Incl: b.Rank != nil && run.delta.Contains(*b.Rank)}, nil)
			return
		}
		j, err := s.rcJob(b.Job)
		if err != nil {
			reply(nil, err)
			return
		}
		jr := s.jobRC(j)
		bound := b.Bound
		if bound == "" {
			bound = pset.AppName(j.app)
		} else if n, err := pset.Parse(bound); err != nil {
			reply(nil, err)
			return
		} else {
			bound = n.String()
		}
		for i := len(jr.order) - 1; i >= 0; i-- {
			run := jr.order[i]
			if bound == pset.NameSelf {
				if b.Rank == nil || !run.concerns(*b.Rank) {
					continue
				}
			} else if !slices.Contains(run.bound, bound) {
				continue
			}
			rec := run.record()
			reply(&wire.RCQueryReply{RC: &rec, Incl: b.Rank != nil && run.delta.Contains(*b.Rank)}, nil)
			return
		}
		reply(&wire.RCQueryReply{}, nil)
	})
}

// concerns reports whether rank is in the delta or in a bound set.
func (run *rcRun) concerns(rank uint32) bool {
	if run.delta.Contains(rank) {
		return true
	}
	for _, m := range run.bmem {
		if m.Contains(rank) {
			return true
		}
	}
	return false
}

func (m *Master) handleRCList(ctx context.Context, _ *wire.Request, b *wire.RCListReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.RCList, error)) {
		var jobs []*job
		if b.Job != "" {
			j, err := s.rcJob(b.Job)
			if err != nil {
				reply(nil, err)
				return
			}
			jobs = []*job{j}
		} else {
			jobs = s.order
		}
		out := &wire.RCList{}
		for _, j := range jobs {
			jr := s.rcs().jobs[j.ns]
			if jr == nil {
				continue
			}
			for _, run := range jr.order {
				if b.All || !run.settled {
					out.RCs = append(out.RCs, run.record())
				}
			}
		}
		reply(out, nil)
	})
}

func (m *Master) handleRCCancel(ctx context.Context, req *wire.Request, b *wire.RCCancelReq) (any, error) {
	b.Job = "" // a tool may cancel the change of any job
	return m.rcCancel(ctx, b, "canceled by "+req.Conn.Peer().String())
}

// handleRCCancelApp cancels a change of the caller's own job (b.Job and
// b.Rank stamped by its daemon): libdynrt's dynrt_rc_cancel.
func (m *Master) handleRCCancelApp(ctx context.Context, _ *wire.Request, b *wire.RCCancelReq) (any, error) {
	if b.Job == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "master: rc.cancel from a daemon without the caller's job")
	}
	return m.rcCancel(ctx, b, "canceled by rank "+strconv.FormatUint(uint64(b.Rank), 10))
}

func (m *Master) rcCancel(ctx context.Context, b *wire.RCCancelReq, by string) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.RC, error)) {
		run, err := s.rcFind(b.Job, b.Delta)
		if err != nil {
			reply(nil, err)
			return
		}
		if run.lost != nil {
			reply(nil, wire.Errorf(wire.ErrState, "master: %s is a failure change (its ranks are lost, they cannot come back); it cannot be canceled: kill the job instead (dynrun jobs kill)", run.r.Delta()))
			return
		}
		why := b.Reason
		if why == "" {
			why = by
		}
		if err := s.rcAbort(run, why, false); err != nil {
			reply(nil, err)
			return
		}
		rec := run.record()
		reply(&rec, nil)
	})
}

// Phase 1.

// rcSubmit starts a change now, queues it, or refuses it.
func (s *state) rcSubmit(b *wire.RCRequest, at time.Time, reply func(*wire.RC, error)) {
	if s.stopping {
		reply(nil, wire.Errorf(wire.ErrState, "master: DVM %s is stopping", s.id))
		return
	}
	j, err := s.rcJob(b.Job)
	if err != nil {
		reply(nil, err)
		return
	}
	if !j.launched && !j.done && j.kill == nil && len(j.earlyRC) < maxEarlyRC {
		// A process of the job may ask as soon as it runs, before the
		// launch round has completed on every node: its request waits
		// for that, then goes on as if it had arrived then.
		j.earlyRC = append(j.earlyRC, func() { s.rcSubmit(b, at, reply) })
		return
	}
	if err := s.rcJobOK(j); err != nil {
		reply(nil, err)
		return
	}
	if _, err := parseRCType(b.Type); err != nil {
		reply(nil, err)
		return
	}
	jr := s.jobRC(j)
	if cur := jr.cur; cur == nil && len(jr.lost) > 0 {
		// Lost ranks wait for their failure SUB, which goes first.
		if !b.Queue {
			reply(nil, wire.Errorf(wire.ErrBusy,
				"master: job %s (%s): ranks %s were lost and their failure change is about to start; one change per job at a time (or queue the request)",
				j.app, j.ns, lostRanges(jr.lost)))
			return
		}
		s.rcQueue(jr, b, at, reply)
		return
	} else if cur != nil {
		if !b.Queue {
			reply(nil, wire.Errorf(wire.ErrBusy,
				"master: job %s (%s): resource change %s (%s, %s) is still in flight; one change per job at a time (or queue the request)",
				j.app, j.ns, cur.r.Delta(), cur.typ, cur.r.Status()))
			return
		}
		s.rcQueue(jr, b, at, reply)
		return
	}
	s.rcStart(jr, b, at, reply)
}

// maxEarlyRC bounds the requests a job being launched holds; beyond it
// they are refused as before ("still being launched").
const maxEarlyRC = 64

// rcQueue puts b in line behind the change in flight. A request without
// Wait is answered at once with status NULL (docs/rc.md): its requester
// may be a member that still has to accept the change in flight, which
// must not wait for its own request. The queued change is announced like
// any other when its turn comes; a refusal then has nobody left to
// answer, so it is logged.
func (s *state) rcQueue(jr *jobRC, b *wire.RCRequest, at time.Time, reply func(*wire.RC, error)) {
	if !b.Wait {
		typ, _ := parseRCType(b.Type)
		rec := wire.RC{
			Job: jr.j.ns, Type: typ, Status: wire.RCNull, N: b.N, Ranks: b.Ranks, Bound: b.Bound,
			Requester: b.Requester, RequesterID: b.RequesterID, Times: wire.RCTimes{Requested: at.UnixNano()},
		}
		reply(&rec, nil)
		log, job := s.log, jr.j.ns
		reply = func(_ *wire.RC, err error) {
			if err != nil {
				log.Warn("master: a queued resource change was refused when its turn came", "job", job, "type", typ, "requester", b.RequesterID, "err", err)
			}
		}
	}
	jr.queue = append(jr.queue, &rcPending{req: *b, at: at, reply: reply})
}

func (s *state) rcJobOK(j *job) error {
	switch {
	case j.done:
		return wire.Errorf(wire.ErrState, "master: job %s (%s) has ended", j.app, j.ns)
	case !j.launched:
		return wire.Errorf(wire.ErrState, "master: job %s (%s) is still being launched", j.app, j.ns)
	case j.kill != nil:
		return wire.Errorf(wire.ErrState, "master: job %s (%s) is being killed (%s)", j.app, j.ns, j.kill.reason)
	}
	return j.staticErr() // MPI jobs started through PMI cannot take part in a change
}

// rcStart runs the synchronous part of phase 1: everything that can fail
// on bad input is checked before anything changes.
func (s *state) rcStart(jr *jobRC, b *wire.RCRequest, at time.Time, reply func(*wire.RC, error)) {
	j := jr.j
	s.flushDead(j) // plan on the sets as they are without the dead
	typ, _ := parseRCType(b.Type)
	if b.TimeoutMS < 0 || b.GraceMS < 0 || b.ConfirmMS < 0 {
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: negative time in a resource change request"))
		return
	}
	if len(b.Bound) > 1 {
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: a change names at most one set (--pset), got %d", len(b.Bound)))
		return
	}
	var (
		ranks  []uint32
		out    []uint32 // REPLACE: the replaced processes
		placed []alloc.Proc
		bound  []string
		err    error
	)
	switch typ {
	case wire.RCAdd:
		placed, bound, err = s.rcPlanAdd(j, b)
		for _, p := range placed {
			ranks = append(ranks, p.Rank)
		}
	case wire.RCSub:
		ranks, bound, err = s.rcPlanSub(j, b)
	case wire.RCReplace:
		out, placed, bound, err = s.rcPlanReplace(j, b)
		for _, p := range placed {
			ranks = append(ranks, p.Rank)
		}
	}
	if err != nil {
		reply(nil, err)
		return
	}
	s.rcBegin(jr, b, at, reply, rcPlan{typ: typ, ranks: ranks, out: out, placed: placed, bound: bound})
}

// rcPlan is what phase 1 chose for a change before it is numbered.
type rcPlan struct {
	typ    string
	ranks  []uint32
	out    []uint32     // REPLACE: the replaced processes
	placed []alloc.Proc // ADD, REPLACE: the new processes
	bound  []string     // ADD, REPLACE: the bound set; a failure SUB: its bound sets (X_c of the lost ranks before they were dropped)
	lost   []lostRank   // a failure SUB: the lost ranks and how they ended (failure.go)
}

// rcBegin numbers a planned change, defines its delta set and starts its
// phase 1 (the part of rcStart after planning; a failure SUB enters here).
func (s *state) rcBegin(jr *jobRC, b *wire.RCRequest, at time.Time, reply func(*wire.RC, error), pl rcPlan) {
	j := jr.j
	typ, ranks, out, placed, bound := pl.typ, pl.ranks, pl.out, pl.placed, pl.bound
	failure := pl.lost != nil
	release := func() { s.rcRetract(j, placed) }
	named := []uint32(nil)
	if typ != wire.RCAdd {
		named = b.Ranks.Ranks()
	}
	rtyp := map[string]rc.Type{wire.RCAdd: rc.TypeAdd, wire.RCSub: rc.TypeSub, wire.RCReplace: rc.TypeReplace}[typ]
	r, _, err := jr.tr.Submit(at, rc.Request{Type: rtyp, N: len(ranks), Ranks: named, By: requester(b)})
	if err != nil {
		release()
		reply(nil, err)
		return
	}
	snap := j.reg.Snapshot(append(slices.Clone(ranks), out...))
	var held map[uint32][]string // failure.go: a loss during this change binds to these
	if typ != wire.RCAdd {
		held = s.heldBy(j, append(slices.Clone(ranks), out...))
	}
	in, err := j.reg.DefineDelta(ranks)
	if err == nil && in.Name != r.Delta() {
		err = wire.Errorf(wire.ErrInternal, "master: delta set numbering out of step: registry defined %s for %s", in.Name, r.Delta())
	}
	var outSet string
	if err == nil && typ == wire.RCReplace {
		var oi pset.Info
		oi, err = j.reg.DefineReplaced(out)
		outSet = oi.Name
	}
	if err != nil {
		release()
		_ = r.Abort(time.Now(), err.Error())
		reply(nil, err)
		return
	}
	if typ == wire.RCSub && !failure {
		// X_c(U) from the registry itself, now that U exists (rcPlanSub
		// checked the same thing before anything changed). A failure SUB
		// brings its own: its ranks are out of every set already.
		if bound, err = j.reg.RefCounted(r.Delta()); err == nil && len(bound) == 0 {
			err = wire.Errorf(wire.ErrInternal, "master: no reference-counted set for %s", r.Delta())
		}
		if err != nil {
			_ = r.Abort(time.Now(), err.Error())
			reply(nil, err)
			return
		}
	}
	run := &rcRun{
		jr: jr, r: r, req: *b, typ: typ, ranks: ranks, delta: wire.RangesOf(ranks), bound: bound,
		procs: placed, snap: snap, placed: time.Now(), gone: make(map[uint32]bool), launchEnd: typ == wire.RCSub,
		out: out, outRR: wire.RangesOf(out), outSet: outSet,
		lost: pl.lost, held: held,
	}
	for _, l := range pl.lost {
		run.gone[l.rank] = true // dead before the change began
	}
	jr.cur = run
	jr.runs[r.Delta()] = run
	jr.order = append(jr.order, run)
	if b.Wait {
		run.waiters = append(run.waiters, reply)
	} else {
		run.announced = reply
	}
	if run.adds() {
		// The new processes join the job table now, so that every later
		// step (job data, kills, exits) sees them.
		for _, p := range placed {
			j.procs.add(jproc{node: p.Node, state: wire.ProcStateLaunching}) // placed is in rank order from the next rank
			j.nodes[p.Node] = j.nodes[p.Node].Add(p.Rank)
		}
		j.live += len(placed)
		j.pmixJoin(run) // pmix_jobctl.go
		idxs := make([]int, 0, len(placed))
		for _, p := range placed {
			if len(idxs) == 0 || idxs[len(idxs)-1] != p.Node {
				idxs = append(idxs, p.Node)
			}
		}
		s.bringUpNodes(j, idxs) // before the change's pushes, which now go there too
	}
	run.placement = s.deltaPlacement(j, ranks)
	def, err := setInfo(j.reg, j.ns, r.Delta(), time.Now().UnixNano())
	if err != nil {
		s.rcFail(run, err)
		return
	}
	defs := []wire.PsetInfo{def}
	if outSet != "" {
		od, err := setInfo(j.reg, j.ns, outSet, time.Now().UnixNano())
		if err != nil {
			s.rcFail(run, err)
			return
		}
		defs = append(defs, od)
	}
	// The delta set rides along the job's new data: one round to the
	// daemons instead of two (docs/scale.md), in the order the daemons
	// apply it (sets, then data).
	run.dataSent = true
	s.pushJobDataWith(j, s.setPush(j, defs, nil), func() { s.rcDefined(run, defs) })
}

// rcPlanAdd checks an ADD and places its processes.
func (s *state) rcPlanAdd(j *job, b *wire.RCRequest) ([]alloc.Proc, []string, error) {
	if len(b.Ranks) > 0 {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "master: an ADD cannot name ranks")
	}
	if b.N == 0 {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "master: an ADD needs a positive number of processes")
	}
	xm := j.reg.Malleable()
	var bound string
	if len(b.Bound) == 1 {
		n, err := pset.Parse(b.Bound[0])
		if err != nil {
			return nil, nil, err
		}
		bound = n.String()
		if !slices.Contains(xm, bound) {
			return nil, nil, wire.Errorf(wire.ErrInvalid, "master: pset %s is not malleable (an ADD binds to one of %s)", bound, strings.Join(xm, ", "))
		}
	} else {
		bound = pset.AppName(j.app)
		if !slices.Contains(xm, bound) {
			// The application set is inactive or inside another active
			// set: take the largest malleable set.
			if len(xm) == 0 {
				return nil, nil, wire.Errorf(wire.ErrInvalid, "master: job %s has no malleable set to bind an ADD to (every set is inactive)", j.app)
			}
			best, size := "", -1
			for _, name := range xm {
				if in, err := j.reg.Get(name, pset.Latest); err == nil && in.Size > size {
					best, size = name, in.Size
				}
			}
			bound = best
		}
	}
	mapBy, err := alloc.ParseMapBy(j.req.MapBy)
	if err != nil {
		return nil, nil, err
	}
	if err := s.m.cfg.Limits.JobProcs(fmt.Sprintf("master: ADD %d to job %s: job of", b.N, j.app), j.live+int(b.N)); err != nil {
		return nil, nil, err
	}
	placed, err := s.allocate(j.ns, int(b.N), alloc.Options{MapBy: mapBy, Oversubscribe: j.req.Oversubscribe})
	if err != nil {
		return nil, nil, fmt.Errorf("master: ADD %d to job %s: %w", b.N, j.app, err)
	}
	// A refusal from here on gives the slots and the ranks back: nothing
	// ever ran with them, and the job table must keep numbering in step
	// with the rank counter (DESIGN §9).
	for i, p := range placed {
		if int(p.Rank) != j.procs.len()+i {
			s.rcRetract(j, placed)
			return nil, nil, wire.Errorf(wire.ErrInternal, "master: job %s: rank %d handed out, expected %d", j.ns, p.Rank, j.procs.len()+i)
		}
		if n := s.nodes[p.Node]; !n.up {
			s.rcRetract(j, placed)
			return nil, nil, wire.Errorf(wire.ErrNoResources, "master: ADD %d to job %s: node %s, where they would go, is down", b.N, j.app, n.name)
		}
	}
	return placed, []string{bound}, nil
}

// rcRetract takes back the slots and ranks of an ADD refused before it
// was numbered.
func (s *state) rcRetract(j *job, placed []alloc.Proc) {
	if err := s.alloc.Retract(j.ns, placed); err != nil {
		s.log.Error("master: cannot take back the slots of a refused change", "job", j.ns, "err", err)
	}
}

// deltaPlacement lists where ranks run (or will run), in node order.
func (s *state) deltaPlacement(j *job, ranks []uint32) []wire.Placement {
	per := map[int]wire.RankRanges{}
	for _, r := range ranks {
		if p := j.procs.at(r); p != nil {
			per[p.node] = per[p.node].Add(r)
		}
	}
	var out []wire.Placement
	for _, n := range s.nodes {
		if rr, ok := per[n.idx]; ok {
			out = append(out, wire.Placement{Node: n.name, Ranks: rr})
		}
	}
	return out
}

// rcPlanSub checks a SUB and chooses its victims: the named ranks, or the
// live processes on the highest slots (oversubscribed ones first), within
// the named set if there is one.
func (s *state) rcPlanSub(j *job, b *wire.RCRequest) ([]uint32, []string, error) {
	if err := b.Ranks.Check(); err != nil {
		return nil, nil, err
	}
	named := b.Ranks.Ranks()
	if len(named) > 0 && b.N != 0 && int(b.N) != len(named) {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "master: SUB of %d processes names %d ranks", b.N, len(named))
	}
	if len(named) == 0 && b.N == 0 {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "master: a SUB needs a positive number of processes or the ranks to remove")
	}
	victims, err := s.rcVictims(j, b, named, "SUB")
	if err != nil {
		return nil, nil, err
	}
	if live := j.live; len(victims) >= live {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "master: SUB of %d would remove every process of job %s (it has %d); end the job instead", len(victims), j.app, live)
	}
	// X_c(U) must not be empty, or nobody could accept the change; and no
	// set of it may lose every live member: its new version X \ U would be
	// empty, which no set can be, and nobody would stay to accept.
	vr := wire.RangesOf(victims)
	found := false
	for _, name := range j.reg.Malleable() {
		ms, err := j.reg.Members(name)
		if err != nil {
			continue
		}
		hit, stays := false, false
		for _, r := range ms {
			if vr.Contains(r) {
				hit = true
			} else if s.procLive(procRef{j.ns, r}) {
				stays = true
			}
		}
		if hit && !stays {
			return nil, nil, wire.Errorf(wire.ErrInvalid, "master: SUB of ranks %s would remove every live member of %s; remove fewer, or end the job", vr, name)
		}
		found = found || hit
	}
	if !found {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "master: no active process set holds ranks %s, so nobody could accept their removal", vr)
	}
	return victims, nil, nil
}

// rcVictims chooses the processes a SUB removes or a REPLACE replaces:
// the named ranks, or the live processes on the highest slots
// (oversubscribed ones first), within the named set if there is one.
func (s *state) rcVictims(j *job, b *wire.RCRequest, named []uint32, typ string) ([]uint32, error) {
	var within wire.RankRanges
	if len(b.Bound) == 1 {
		ms, err := j.reg.Members(b.Bound[0])
		if err != nil {
			return nil, err
		}
		within = wire.RangesOf(ms)
	}
	var victims []uint32
	if len(named) > 0 {
		for _, r := range named {
			if !s.procLive(procRef{j.ns, r}) {
				return nil, wire.Errorf(wire.ErrNotFound, "master: job %s has no live rank %d", j.app, r)
			}
			if within != nil && !within.Contains(r) {
				return nil, wire.Errorf(wire.ErrInvalid, "master: rank %d is not a member of %s", r, b.Bound[0])
			}
		}
		victims = named
	} else {
		procs := s.alloc.Procs(j.ns)
		slices.SortStableFunc(procs, func(a, b alloc.Proc) int {
			switch {
			case a.Slot == alloc.Oversubscribed && b.Slot == alloc.Oversubscribed:
				return int(b.Rank) - int(a.Rank)
			case a.Slot == alloc.Oversubscribed:
				return -1
			case b.Slot == alloc.Oversubscribed:
				return 1
			}
			return b.Slot - a.Slot
		})
		for _, p := range procs {
			if len(victims) == int(b.N) {
				break
			}
			if s.procLive(procRef{j.ns, p.Rank}) && (within == nil || within.Contains(p.Rank)) {
				victims = append(victims, p.Rank)
			}
		}
		if len(victims) < int(b.N) {
			where := "job " + j.app
			if within != nil {
				where = b.Bound[0]
			}
			return nil, wire.Errorf(wire.ErrInvalid, "master: %s of %d: %s has only %d live processes", typ, b.N, where, len(victims))
		}
	}
	slices.Sort(victims)
	return victims, nil
}

// rcFail aborts a change whose phase 1 failed inside the master.
func (s *state) rcFail(run *rcRun, err error) {
	s.log.Error("master: resource change failed", "delta", run.r.Delta(), "err", err)
	_ = s.rcAbort(run, err.Error(), true)
}

// rcDefined runs once every daemon has the delta set and the job's data.
func (s *state) rcDefined(run *rcRun, defs []wire.PsetInfo) {
	if run.r.Status() == rc.StatusAborted {
		return
	}
	var err error
	if run.typ == wire.RCReplace {
		err = run.r.DefineReplace(time.Now(), run.ranks, run.out, run.bound[0])
	} else {
		err = run.r.DefineDelta(time.Now(), run.ranks, run.bound)
	}
	if err != nil {
		s.rcFail(run, err)
		return
	}
	j := run.jr.j
	for _, def := range defs {
		def.Members = nil
		s.publish(wire.Event{Kind: wire.EvPsetDef, Job: j.ns, Pset: &def})
	}
	s.rcJobPushed(run)
}

// pushJobData sends the job as it now is to every daemon: what changed
// since the generation a daemon has, or the whole data to a daemon that
// has not got the previous one (it rejoined) and for a job with PMIx,
// whose server numbers the nodes in the order of the master's data.
func (s *state) pushJobData(j *job, done func()) {
	s.pushJobDataWith(j, nil, done)
}

// pushJobDataWith is pushJobData with sets to define (or delete) in the
// same message, ahead of the data.
func (s *state) pushJobDataWith(j *job, sets *wire.PsetPush, done func()) {
	prev := j.gen
	j.gen++
	data := s.rcJobData(j)
	kept := data // what deltas are made from: without the sets
	data.Psets = sets
	full := share(&data)
	var delta *sharedBody
	if j.pushed != nil && j.pushed.Gen == prev && !j.pmixData() {
		d := data.DeltaFrom(j.pushed)
		delta = share(&d)
	}
	j.pushed = &kept
	s.pushAllWith(j, wire.KindNodeJobData, &data, func(n *node) *sharedBody {
		g, ok := n.jobGen[j.ns]
		n.sentJobData(j.ns, data.Gen)
		if delta != nil && ok && g == prev {
			return delta
		}
		return full
	}, done)
}

// rcJobData describes j for the daemons: its live processes without those
// a change is removing (SUB not aborted) or taking back (aborted ADD).
// While the change is in flight the data also says what it changes
// (Pending, Adding, Leaving), so that a process that starts meanwhile
// sees the job as it is until the change is FINALIZED, not as it will be.
func (s *state) rcJobData(j *job) wire.JobData {
	var excl, adding wire.RankRanges
	data := wire.JobData{Gen: j.gen, ID: j.id, Job: j.ns, App: j.app, NextRank: uint32(j.procs.len()), PMIx: j.pmixSpaces()}
	if jr := s.rcs().jobs[j.ns]; jr != nil && jr.cur != nil {
		cur := jr.cur
		st := cur.r.Status()
		aborted := st == rc.StatusAborted
		switch {
		case (cur.typ == wire.RCSub && !aborted) || (cur.adds() && aborted):
			excl = cur.delta
		case cur.typ == wire.RCReplace:
			excl = cur.outRR // the job after the change
		}
		if !aborted && st != rc.StatusFinalized {
			data.Pending = cur.r.Delta()
			if cur.adds() {
				adding = cur.delta
			}
		}
	}
	size := 0
	for _, n := range s.nodes {
		rr, ok := j.nodes[n.idx]
		if !ok {
			continue
		}
		if len(excl) > 0 {
			out := rr.Intersect(excl)
			rr = rr.Minus(excl)
			if len(out) > 0 && data.Pending != "" {
				data.Leaving = data.Leaving.Union(out)
			}
		}
		if len(rr) == 0 {
			continue
		}
		size += rr.Count()
		data.Placement = append(data.Placement, wire.Placement{Node: n.name, Ranks: rr})
		if len(adding) > 0 {
			data.Adding = data.Adding.Union(rr.Intersect(adding))
		}
	}
	data.Size = uint32(size)
	return data
}

// rcJobPushed runs once every daemon has the new job data: the change is
// announced.
func (s *state) rcJobPushed(run *rcRun) {
	if run.r.Status() == rc.StatusAborted {
		return
	}
	now := time.Now()
	if err := run.r.PushJobData(now); err != nil {
		s.rcFail(run, err)
		return
	}
	if err := run.r.Announce(now); err != nil {
		s.rcFail(run, err)
		return
	}
	j := run.jr.j
	s.flushDead(j) // the members that accept must all be alive
	run.bmem = make(map[string]wire.RankRanges, len(run.bound))
	for _, b := range run.bound {
		in, err := j.reg.Get(b, pset.Latest)
		if err != nil {
			s.rcFail(run, err)
			return
		}
		ref := wire.PsetRef{Name: b, Version: uint32(in.Version)}
		ms, err := j.reg.Members(b + "@" + uitoa(ref.Version))
		if err != nil {
			s.rcFail(run, err)
			return
		}
		run.refs = append(run.refs, ref)
		run.bmem[b] = wire.RangesOf(ms)
		if err := j.reg.Pin(b); err == nil {
			run.pinned = true
		}
	}
	d := s.m.cfg.RCConfirmTimeout
	if run.req.ConfirmMS > 0 {
		d = time.Duration(run.req.ConfirmMS) * time.Millisecond
	}
	if d <= 0 {
		d = DefaultRCConfirmTimeout
	}
	m := s.m
	run.timer = time.AfterFunc(d, func() { m.post(func(s *state) { s.rcTimeout(run, d) }) })
	s.rcUpdate(run, func(rec *wire.RC) {
		if run.announced != nil {
			run.announced(rec, nil)
			run.announced = nil
		}
		if run.adds() && run.r.Status() != rc.StatusAborted {
			s.rcLaunch(run)
		}
	})
	if run.lost != nil {
		s.rcAcceptOrphans(run) // failure.go
	}
}

// rcLaunch starts the new processes of an ADD.
func (s *state) rcLaunch(run *rcRun) {
	j := run.jr.j
	run.launched = time.Now()
	run.launching = true
	per := map[int]wire.RankRanges{}
	for _, p := range run.procs {
		per[p.Node] = per[p.Node].Add(p.Rank)
	}
	var calls []*nodeCall
	var lost []uint32
	for _, n := range s.nodes {
		rr, ok := per[n.idx]
		if !ok {
			continue
		}
		if !n.up {
			lost = append(lost, rr.Ranks()...)
			continue
		}
		calls = append(calls, &nodeCall{
			node: n.idx, kind: wire.KindNodeLaunch, ranks: rr,
			body: &wire.LaunchReq{
				Job: j.ns, App: j.app, ID: j.id, Ranks: rr, Argv: j.req.Argv, Env: j.req.Env, Wdir: j.req.Wdir,
				Output: j.req.Output, Delta: run.r.Delta(), PMI: j.pmixLaunch(),
			},
		})
	}
	s.callRound(calls, func(s *state) { s.rcLaunchDone(run, calls) })
	for _, r := range lost {
		s.recordExit(j, wire.ProcExited{Job: j.ns, Rank: r, Code: 1, Err: "its node is down"}, "")
	}
}

// rcLaunchDone books the outcome of the launch round of an ADD.
func (s *state) rcLaunchDone(run *rcRun, calls []*nodeCall) {
	j := run.jr.j
	run.launching = false
	run.launchEnd = true
	if j.done {
		return
	}
	for _, c := range calls {
		var running wire.RankRanges
		for _, st := range c.rep.Started {
			p := j.procs.at(st.Rank)
			if p == nil || !run.delta.Contains(st.Rank) {
				continue
			}
			p.pid, p.started = st.PID, st.Time
			if p.state == wire.ProcStateLaunching {
				p.state = wire.ProcStateRunning
				running = running.Add(st.Rank)
			}
			run.started++
		}
		if len(running) > 0 {
			s.publish(wire.Event{Kind: wire.EvProcState, Job: j.ns, Ranks: running, Node: s.nodes[c.node].name, State: wire.ProcStateRunning})
		}
		if c.err != nil {
			for r := range c.ranks.All() {
				if p := j.procs.at(r); p != nil && p.state == wire.ProcStateLaunching {
					s.recordExit(j, wire.ProcExited{Job: j.ns, Rank: r, Node: s.nodes[c.node].name, Code: startCode(c.err), Err: c.err.Error()}, "")
				}
			}
		}
	}
	switch {
	case run.r.Status() == rc.StatusAborted, j.kill != nil:
		// Aborted, or the job is being killed, while the launch was in
		// flight: a daemon may have forked after the kill reached it, and
		// nothing else would end those processes (the job's kill went out
		// before they existed, so the job would never end).
		s.rcKillDelta(run, syscall.SIGTERM, run.ranks)
	default:
		if run.started == len(run.ranks) {
			if err := run.r.AllStarted(time.Now()); err == nil {
				s.rcUpdate(run, nil)
			}
		}
	}
	s.rcSettle(run)
}

// Exits.

// rcProcExit is called by recordExit for every process that ends (failed
// says whether the exit would fail the job). It returns true when the exit
// is the change's own business and so no failure of the job: a new
// process of an ADD before it is FINALIZED (the ADD aborts), or a process
// a SUB removes once it has been told to leave (PENDING or FINALIZED); a
// removed process that did not leave cleanly is noted for the job's
// report. Any other death of a process the change counts on aborts the
// change, and the exit is judged like any other (docs/reliability.md):
// a process a SUB would remove that dies before the SUB was accepted, or
// a member of a bound set before the change is FINALIZED (its accept
// fence would wait for it until the timeout).
func (s *state) rcProcExit(j *job, rank uint32, how string, failed bool) bool {
	if s.rc == nil {
		return false
	}
	jr := s.rc.jobs[j.ns]
	if jr == nil || jr.cur == nil || jr.cur.settled {
		return false
	}
	run := jr.cur
	st := run.r.Status()
	inDelta := run.delta.Contains(rank)
	if inDelta || run.outRR.Contains(rank) {
		run.gone[rank] = true
	}
	abort := func(why string) {
		if j.kill != nil {
			why = "the job is being killed (" + j.kill.reason + ")"
		}
		_ = s.rcAbort(run, why, true)
	}
	switch {
	case run.adds() && inDelta && st == rc.StatusFinalized:
		s.rcSettle(run)
		return false // a member of the job like any other now
	case run.typ == wire.RCReplace && run.outRR.Contains(rank) && st == rc.StatusFinalized:
		// Replaced, and told to leave: as a process a SUB removed.
		if failed {
			j.noteRemoved(fmt.Sprintf("%s after %s replaced it", how, run.r.Delta()))
		}
		s.rcSettle(run)
		return true
	case run.adds() && inDelta:
		if !st.Terminal() {
			if run.lost != nil && run.newFailed == "" {
				run.newFailed = how // a failure REPLACE cannot be tried again (rcRefold)
			}
			abort(fmt.Sprintf("new process %s before confirming", how))
		}
		s.rcSettle(run)
		return true
	case run.typ == wire.RCSub && inDelta && (st == rc.StatusPending || st == rc.StatusFinalized):
		if failed {
			j.noteRemoved(fmt.Sprintf("%s after %s removed it", how, run.r.Delta()))
		}
		s.rcSettle(run)
		return true
	case st.Terminal() || (run.typ == wire.RCSub && st == rc.StatusPending):
		// Too late to abort: a SUB some set accepted may have removed
		// processes already.
		s.rcSettle(run)
		return false
	case inDelta:
		abort(fmt.Sprintf("%s before the change was accepted", how))
	case s.rcBoundMember(run, rank):
		abort(fmt.Sprintf("%s, a member of a bound set, before the change finalized", how))
	}
	return false
}

// rcBoundMember reports whether rank is in a set the change is bound to:
// its members at the announcement, or before it the set's latest version.
func (s *state) rcBoundMember(run *rcRun, rank uint32) bool {
	if run.bmem != nil {
		for _, m := range run.bmem {
			if m.Contains(rank) {
				return true
			}
		}
		return false
	}
	for _, b := range run.bound {
		if ms, err := run.jr.j.reg.Members(b); err == nil && slices.Contains(ms, rank) {
			return true
		}
	}
	return false
}

// rcTimeout fires when an ADD was not FINALIZED (or a SUB not accepted)
// in time.
func (s *state) rcTimeout(run *rcRun, d time.Duration) {
	switch st := run.r.Status(); {
	case run.lost != nil && (st == rc.StatusAnnounced || (run.typ == wire.RCReplace && st == rc.StatusPending)):
		s.rcFailureTimeout(run, d)
	case run.adds() && !st.Terminal():
		_ = s.rcAbort(run, fmt.Sprintf("not confirmed within %v", d), true)
	case run.typ == wire.RCSub && st == rc.StatusAnnounced:
		_ = s.rcAbort(run, fmt.Sprintf("not accepted within %v", d), true)
	case run.typ == wire.RCSub && st == rc.StatusPending:
		s.rcExpire(run, d)
	}
}

// rcExpire completes a SUB that some bound sets accepted but not all in
// time: members of the sets that accepted may have left already, so the
// change goes through instead of aborting (invariant d: it ends within its
// timeout). The runtime takes the delta out of every set (what the late
// sets' phase 2 would have done) and the removed processes get the usual
// grace period before they are killed.
func (s *state) rcExpire(run *rcRun, d time.Duration) {
	var late []string
	for _, b := range run.bound {
		if !slices.ContainsFunc(run.r.Accepted(), func(a rc.Accept) bool { return a.From == b }) {
			late = append(late, b)
		}
	}
	why := fmt.Sprintf("completed by the runtime: %s did not accept within %v", strings.Join(late, ", "), d)
	if err := run.r.Expire(time.Now(), why); err != nil {
		s.log.Warn("master: cannot complete a resource change", "delta", run.r.Delta(), "err", err)
		return
	}
	j := run.jr.j
	s.rcPushSets(j, j.reg.DropRanks(run.ranks), nil)
	s.rcFinalized(run)
}

// rcGraceOver kills the removed processes of a SUB that are still there.
func (s *state) rcGraceOver(run *rcRun) {
	if run.settled {
		return
	}
	if err := run.r.Enforce(time.Now()); err != nil {
		return
	}
	s.rcKillDelta(run, syscall.SIGTERM, run.leaving())
	s.rcUpdate(run, nil)
}

// rcKillDelta signals the given processes of the change (the delta, or
// those it replaces) still alive (SIGKILL after the master's grace).
func (s *state) rcKillDelta(run *rcRun, sig syscall.Signal, ranks []uint32) {
	j := run.jr.j
	per := map[int]wire.RankRanges{}
	for _, r := range ranks {
		if !run.gone[r] && s.procLive(procRef{j.ns, r}) {
			n := j.procs.at(r).node
			per[n] = per[n].Add(r)
		}
	}
	for idx, rr := range per {
		if n := s.nodes[idx]; n.up {
			s.sendNode(n, outMsg{kind: wire.KindNodeKill, body: &wire.KillReq{Job: j.ns, Ranks: rr, Signal: int(sig), GraceMS: s.m.grace.Milliseconds()}})
		}
	}
}

// Aborts.

// rcAbort ends a change as ABORTED. Unless forced, a SUB can be aborted
// only before its first accept (after that, removed processes may be gone
// already).
func (s *state) rcAbort(run *rcRun, why string, force bool) error {
	st := run.r.Status()
	if st.Terminal() {
		return wire.Errorf(wire.ErrState, "master: resource change %s is already %s", run.r.Delta(), st)
	}
	if run.typ == wire.RCSub && st == rc.StatusPending && !force {
		return wire.Errorf(wire.ErrState, "master: resource change %s (SUB) has been accepted by %d of %d sets; processes may have left already, so it cannot be aborted",
			run.r.Delta(), len(run.r.Accepted()), len(run.bound))
	}
	if err := run.r.Abort(time.Now(), why); err != nil {
		return err
	}
	j := run.jr.j
	s.rcStopTimer(run)
	s.rcUnpin(run)
	if run.announced != nil {
		run.announced(nil, wire.Errorf(wire.ErrAborted, "master: resource change %s aborted: %s", run.r.Delta(), why))
		run.announced = nil
	}
	if !j.done {
		if run.adds() {
			if run.launched.IsZero() {
				for _, r := range run.ranks {
					if p := j.procs.at(r); p != nil && p.state == wire.ProcStateLaunching {
						run.gone[r] = true
						s.recordExit(j, wire.ProcExited{Job: j.ns, Rank: r, Node: s.nodes[p.node].name, Forced: true},
							"was not started: the resource change was aborted")
					}
				}
			} else {
				s.rcKillDelta(run, syscall.SIGTERM, run.ranks)
			}
		}
		if run.dataSent && !j.done {
			s.pushJobData(j, func() {})
		}
		s.rcRestoreSets(run)
	}
	s.rcRefold(run)
	s.rcReleaseKeys(run, why)
	for _, b := range run.blocked {
		s.rcDecide(run, b.key, b.owner, nil, s.rcAbortErr(run))
		b.reply(nil, s.rcAbortErr(run))
	}
	run.blocked = nil
	s.rcUpdate(run, nil)
	s.rcSettle(run)
	return nil
}

func (s *state) rcAbortErr(run *rcRun) error {
	return wire.Errorf(wire.ErrAborted, "master: resource change %s was aborted: %s", run.r.Delta(), run.r.AbortReason())
}

func (s *state) rcStopTimer(run *rcRun) {
	if run.timer != nil {
		run.timer.Stop()
		run.timer = nil
	}
}

func (s *state) rcUnpin(run *rcRun) {
	if !run.pinned {
		return
	}
	run.pinned = false
	for _, b := range run.bound {
		_ = run.jr.j.reg.Unpin(b)
	}
}

// rcJobEnded is called by endJob: the change in flight is aborted (its
// processes are gone with the job) and queued requests fail.
func (s *state) rcJobEnded(j *job) {
	if s.rc == nil {
		return
	}
	jr := s.rc.jobs[j.ns]
	if jr == nil {
		return
	}
	var unhandled []lostRank // losses no failure change finalized: they fail the job
	if run := jr.cur; run != nil {
		if run.lost != nil && run.r.Status() != rc.StatusFinalized {
			unhandled = append(unhandled, run.lost...)
		}
		if !run.r.Status().Terminal() {
			_ = s.rcAbort(run, "the job ended", true)
		}
		s.rcStopTimer(run)
		s.rcSettle(run)
	}
	for _, p := range jr.queue {
		p.reply(nil, wire.Errorf(wire.ErrAborted, "master: job %s ended before the queued resource change could start", j.app))
	}
	jr.queue = nil
	s.lossUnhandled(j, append(unhandled, jr.lost...))
	jr.lost = nil
}

// Settling.

// rcSettle finishes a change whose processes and slots are all accounted
// for, and starts the next queued request.
func (s *state) rcSettle(run *rcRun) {
	if run.settled {
		return
	}
	j := run.jr.j
	st := run.r.Status()
	alive := func(ranks []uint32) int {
		n := 0
		for _, r := range ranks {
			if !run.gone[r] && s.procLive(procRef{j.ns, r}) {
				n++
			}
		}
		return n
	}
	switch {
	case j.done:
	case st == rc.StatusFinalized && run.typ == wire.RCAdd:
		if run.r.Times().AllStarted.IsZero() {
			return
		}
	case st == rc.StatusFinalized && run.typ != wire.RCAdd: // SUB, REPLACE
		leaving := run.leaving()
		if alive(leaving) > 0 || (run.typ == wire.RCReplace && run.r.Times().AllStarted.IsZero()) {
			return
		}
		if err := run.r.AllExited(time.Now()); err != nil {
			s.log.Warn("master: resource change", "delta", run.r.Delta(), "err", err)
		}
		s.rcStopTimer(run)
		s.releaseSlots(j, leaving)
		s.rcInactive(run, run.leavingSet())
		s.pushJobData(j, func() {}) // the removed processes are out of the job table now
	case st == rc.StatusAborted && run.adds():
		if !run.launchEnd && !run.launched.IsZero() || alive(run.ranks) > 0 {
			return
		}
		run.exited = time.Now()
		s.releaseSlots(j, run.ranks)
		s.rcInactive(run, run.r.Delta())
		s.rcRewind(run)
	case st == rc.StatusAborted:
	default:
		return
	}
	run.settled = true
	s.rcStopTimer(run)
	s.rcUnpin(run)
	jr := run.jr
	if jr.cur == run {
		jr.cur = nil
	}
	waiters := run.waiters
	run.waiters = nil
	finish := func(rec *wire.RC) {
		var err error
		if run.r.Status() == rc.StatusAborted {
			err = s.rcAbortErr(run)
		}
		for _, w := range waiters {
			if err != nil {
				w(nil, err)
			} else {
				w(rec, nil)
			}
		}
	}
	if j.done {
		rec := run.record()
		s.publish(run.event(&rec, "settled"))
		finish(&rec)
	} else {
		s.rcUpdate(run, finish)
		s.rcRetain(jr)
	}
	s.rcNext(jr)
}

// rcRetain applies the retention rule (docs/limits.md "Retained
// history") once a change has settled: a job keeps the records of its
// latest history-changes settled changes, and every set its latest
// history-versions versions. A forgotten change takes its delta set (on
// the master and the daemons: deleting a delta set drops the daemon's
// record too), its published keys and the job-table entries of its ended
// processes with it. Sets pinned by a change in
// flight keep all their versions until it ends.
func (s *state) rcRetain(jr *jobRC) {
	j := jr.j
	lim := s.m.cfg.Limits.Normalize()
	settled := 0
	for _, run := range jr.order {
		if run.settled {
			settled++
		}
	}
	var forgot []string
	keep := jr.order[:0]
	for _, run := range jr.order {
		if run.settled && settled > lim.HistoryChanges {
			settled--
			delta := run.r.Delta()
			if err := j.reg.ForgetDelta(delta); err != nil {
				s.log.Warn("master: cannot forget the delta set of a change", "delta", delta, "err", err)
			}
			_ = jr.tr.Forget(delta)
			delete(jr.runs, delta)
			for _, r := range append(slices.Clone(run.ranks), run.out...) {
				// Processes the change removed, or started and lost:
				// ended, they go from the job table with the record.
				if p := j.procs.at(r); p != nil && !s.procLive(procRef{j.ns, r}) {
					j.procs.forget(r)
				}
			}
			s.rcDropKeys(j, delta)
			forgot = append(forgot, delta)
			continue
		}
		keep = append(keep, run)
	}
	clear(jr.order[len(keep):])
	jr.order = keep
	j.reg.PruneAll(lim.HistoryVersions)
	if len(forgot) > 0 {
		s.pushSets(j, nil, forgot, func() {})
	}
}

// rcDropKeys unpublishes the keys of a forgotten change (its accept,
// confirm and decision keys, all named "<delta>:...").
func (s *state) rcDropKeys(j *job, delta string) {
	ss := s.m.sess
	if ss == nil {
		return
	}
	m := ss.pub.ranges["job:"+j.ns]
	for k := range m {
		if strings.HasPrefix(k, delta+":") {
			delete(m, k)
		}
	}
}

// rcRewind gives back the ranks of an aborted ADD once its processes are
// all gone (DESIGN §9: an abort leaves the rank counter as it was): they
// never became members of the job, so the next ADD takes them. The
// record keeps how the aborted processes ended.
func (s *state) rcRewind(run *rcRun) {
	j := run.jr.j
	if len(run.ranks) == 0 {
		return
	}
	first := slices.Min(run.ranks)
	if j.procs.len() != int(slices.Max(run.ranks))+1 {
		return // not the newest ranks: cannot happen with one change at a time
	}
	run.endedAt = run.ended()
	for _, r := range run.ranks {
		j.procs.forget(r)
	}
	if !j.procs.rewind(first) {
		s.log.Error("master: cannot rewind the job table after an aborted change", "delta", run.r.Delta())
		return
	}
	if err := s.alloc.Rewind(j.ns, first); err != nil {
		s.log.Error("master: cannot rewind the rank counter after an aborted change", "delta", run.r.Delta(), "err", err)
	}
	if run.dataSent {
		s.pushJobData(j, func() {}) // NextRank went back
	}
}

// rcInactive removes the ranks of delta (the change's delta set, or the
// set a REPLACE replaces) from the inactive sets (a finished SUB or
// REPLACE, an aborted ADD or REPLACE) and pushes the sets that changed.
func (s *state) rcInactive(run *rcRun, delta string) {
	j := run.jr.j
	changed, err := j.reg.ApplyDeltaToInactive(delta, pset.OpDifference)
	if err != nil || len(changed) == 0 {
		return
	}
	now := time.Now().UnixNano()
	var defs []wire.PsetInfo
	for _, in := range changed {
		def, err := setInfo(j.reg, j.ns, in.Name, now)
		if err != nil {
			continue
		}
		defs = append(defs, def)
		ev := def
		ev.Members = nil
		s.publish(wire.Event{Kind: wire.EvPsetDef, Job: j.ns, Pset: &ev})
	}
	s.pushSets(j, defs, nil, func() {})
}

// rcRestoreSets gives the ranks of an aborted change the membership they
// had in every set before it (DESIGN §9 "aborts restore"): phase 2 may
// have put the new ranks of an ADD into sets (a UNION with the delta), or
// taken those of a SUB out (a DIFFERENCE), active sets and the inactive
// ones of Definition 4's recursion alike. Delta ranks that died meanwhile
// stay out. Sets the change's phase 2 created with only new ranks are
// deleted.
func (s *state) rcRestoreSets(run *rcRun) {
	j := run.jr.j
	var dead []uint32
	for _, r := range run.leaving() {
		if !s.procLive(procRef{j.ns, r}) {
			dead = append(dead, r)
		}
	}
	changed, deleted := j.reg.Restore(run.snap, dead)
	s.rcPushSets(j, changed, deleted)
}

// rcPushSets publishes and pushes sets the runtime changed on its own.
func (s *state) rcPushSets(j *job, changed []pset.Info, deleted []string) {
	if len(changed)+len(deleted) == 0 {
		return
	}
	now := time.Now().UnixNano()
	var defs []wire.PsetInfo
	for _, in := range changed {
		def, err := setInfo(j.reg, j.ns, in.Name, now)
		if err != nil {
			s.log.Warn("master: cannot describe a set", "set", in.Name, "err", err)
			continue
		}
		defs = append(defs, def)
		ev := def
		ev.Members = nil
		s.publish(wire.Event{Kind: wire.EvPsetDef, Job: j.ns, Pset: &ev})
	}
	for _, name := range deleted {
		s.publish(wire.Event{Kind: wire.EvPsetDel, Job: j.ns, Pset: &wire.PsetInfo{Name: name, Job: j.ns}})
	}
	s.pushSets(j, defs, deleted, func() {})
}

// rcAbortedDelta refuses a set operation with the delta of an aborted
// change, ADD or SUB: the application's phase 2 may reach the master after
// the abort restored the sets (rcRestoreSets), and applying it then would
// put an aborted ADD's ranks into a set, or take an aborted SUB's ranks
// (which stay) out of one for good. An abort runs whole on the loop, so
// there is no "aborting" state to check besides ABORTED.
func (s *state) rcAbortedDelta(j *job, names ...string) error {
	for _, name := range names {
		n, err := pset.Parse(name)
		if err != nil || n.Kind != pset.KindDelta || s.rc == nil {
			continue
		}
		n.Out = false // a REPLACE's second set: its change
		jr := s.rc.jobs[j.ns]
		if jr == nil {
			continue
		}
		run := jr.runs[n.String()]
		if run == nil || run.r.Status() != rc.StatusAborted {
			continue
		}
		what := "its processes never joined"
		switch run.typ {
		case wire.RCSub:
			what = "its processes stay in their sets"
		case wire.RCReplace:
			what = "its new processes never joined and the replaced ones stay"
		}
		return wire.Errorf(wire.ErrAborted, "master: resource change %s (%s) was aborted (%s): %s; a set operation with its delta is refused",
			run.r.Delta(), run.typ, run.r.AbortReason(), what)
	}
	return nil
}

// rcNext starts the oldest queued request of jr, if nothing is in flight.
func (s *state) rcNext(jr *jobRC) {
	if jr.cur == nil && len(jr.lost) > 0 {
		s.rcLossSoon(jr) // a failure SUB goes ahead of queued requests; they follow it
		return
	}
	if jr.cur == nil && len(jr.queue) > 0 && jr.j.lossChanges() && jr.j.booking > 0 {
		// An exit is being booked (its death may have aborted the change
		// in flight): it may be a loss, whose failure SUB goes first.
		m := s.m
		go m.post(func(s *state) { s.rcNext(jr) })
		return
	}
	for jr.cur == nil && len(jr.queue) > 0 {
		p := jr.queue[0]
		jr.queue = jr.queue[1:]
		if err := s.rcJobOK(jr.j); err != nil {
			p.reply(nil, err)
			continue
		}
		b := p.req
		s.rcStart(jr, &b, p.at, p.reply)
	}
}

// Records and updates.

// record describes the change for the wire.
func (run *rcRun) record() wire.RC {
	in := run.r.Info()
	t := in.Times
	ns := func(x time.Time) int64 {
		if x.IsZero() {
			return 0
		}
		return x.UnixNano()
	}
	rec := wire.RC{
		Delta: in.Delta, Job: run.jr.j.ns, Type: run.typ, Status: in.Status.String(), Bound: in.Bound,
		Requester: run.req.Requester, RequesterID: run.req.RequesterID, N: uint32(len(run.ranks)), Ranks: run.delta,
		NewSet: run.newSet, Accepts: uint32(len(in.Accepts)), Reason: in.AbortReason, Seq: run.seq,
		Out: run.outRR, OutSet: run.outSet,
		BoundRefs: run.refs, Settled: run.settled, Placement: run.placement,
		Times: wire.RCTimes{
			Requested: ns(t.Requested), Placed: ns(run.placed), Defined: ns(t.DeltaDefined), JobData: ns(t.JobDataPushed),
			Announced: ns(t.Announced), Launched: ns(run.launched), Started: ns(t.AllStarted), Accepted: ns(t.AcceptPublished),
			Confirmed: ns(t.Confirmed), Finalized: ns(t.Finalized), Exited: ns(t.AllExited), Aborted: ns(t.Aborted),
			Enforced: ns(t.Enforced),
		},
	}
	if rec.Bound == nil {
		rec.Bound = run.bound
	}
	rec.Cause = lostCause(run.lost)
	rec.Ended = run.ended()
	if rec.Times.Exited == 0 {
		rec.Times.Exited = ns(run.exited)
	}
	return rec
}

// ended lists the delta's processes that have ended, and how: a process a
// SUB removed that exited non-zero, or an ADD's new process that died, is
// visible in the change's record (dynrc show).
func (run *rcRun) ended() []wire.ProcInfo {
	if run.endedAt != nil {
		return run.endedAt
	}
	j := run.jr.j
	var out []wire.ProcInfo
	for _, r := range append(slices.Clone(run.ranks), run.out...) {
		p := j.procs.at(r)
		if p == nil {
			continue
		}
		switch p.state {
		case wire.ProcStateExited, wire.ProcStateFailed, wire.ProcStateKilled:
			out = append(out, wire.ProcInfo{Rank: r, Node: run.jr.s.nodes[p.node].name, State: p.state, Code: p.code, Signal: p.sig, Ended: p.ended})
		}
	}
	return out
}

// event is the event that publishes rec, the record's next update: an
// rc.state when its status differs from the last one published (one per
// status), else an rc.update. It runs on the loop in update order.
func (run *rcRun) event(rec *wire.RC, msg string) wire.Event {
	kind := wire.EvRCUpdate
	if rec.Status != run.shown {
		kind, run.shown = wire.EvRCState, rec.Status
	}
	return wire.Event{Kind: kind, Job: run.jr.j.ns, RC: rec, State: rec.Status, Msg: msg}
}

// rcUpdate pushes the current record to every daemon and, once all have
// it, publishes its event (rc.state for a new status, else rc.update) and
// calls then (if set) with the record. Pushes to one daemon are ordered,
// so events come out in update order.
func (s *state) rcUpdate(run *rcRun, then func(*wire.RC)) {
	if ss := s.m.sess; ss != nil && !run.leftFences && run.goingAway() {
		run.leftFences = true
		ss.procsLeaving(s, run.jr.j.ns, run.leaving())
	}
	run.seq++
	rec := run.record()
	j := run.jr.j
	s.pushAll(j, wire.KindRCPush, &rec, func() {
		s.publish(run.event(&rec, ""))
		if then != nil {
			then(&rec)
		}
	})
}

// History counts what the master keeps about the past of its jobs that
// have not ended (docs/limits.md "Retained history"). For tests and
// diagnostics: with the retention rule, these stay flat however many
// changes a job goes through.
type History struct {
	Changes  int // change records
	Sets     int // process sets, delta sets included
	Versions int // set versions over all sets
	Keys     int // published keys in the jobs' ranges
	Procs    int // job-table entries, ended processes included
}

// History returns the counts over the live jobs.
func (m *Master) History(ctx context.Context) (History, error) {
	return ask(ctx, m, func(s *state, reply func(History, error)) {
		var h History
		for _, j := range s.order {
			if j.done {
				continue
			}
			if jr := s.rcs().jobs[j.ns]; jr != nil {
				h.Changes += len(jr.order)
			}
			h.Procs += j.procs.known()
			v, n := j.reg.Versions()
			h.Versions += v
			h.Sets += n
			if ss := s.m.sess; ss != nil {
				h.Keys += len(ss.pub.ranges["job:"+j.ns])
			}
		}
		reply(h, nil)
	})
}

// pmixData says whether j's daemons run a PMIx server for it, which reads
// the job data's node order (pushJobData sends such a job's data whole).
// everywhere reports whether every daemon keeps j's data and sets, not
// only those of its nodes: a PMIx server translates the names of any
// job's processes from its daemon's data (lib/daemon pmixDynrt).
func (j *job) everywhere() bool {
	return j.req.PMI == wire.PMIPMIx || j.req.PMI == wire.PMIBoth || j.pmixData()
}

func (j *job) pmixData() bool {
	return j.pmi != nil && j.pmi.info != nil && (j.pmi.info.Mode == wire.PMIPMIx || j.pmi.info.Mode == wire.PMIBoth)
}
