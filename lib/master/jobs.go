package master

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// Why a job is being killed (wire.JobEnd* values).
const (
	reasonFailed  = wire.JobEndFailed
	reasonKill    = wire.JobEndKill
	reasonTimeout = wire.JobEndTimeout
	reasonStop    = wire.JobEndStop
	reasonLost    = wire.JobEndLost
	reasonAbort   = wire.JobEndAbort
)

// maxEnded bounds how many ended jobs the master remembers (for job.wait
// after the end, job lists and dvm.state with Ended).
const maxEnded = 256

// job is one job of the DVM.
type job struct {
	id    uint32
	ns    string // namespace <dvm>.<id>
	app   string
	req   wire.JobLaunchReq
	owner *peer // launching tool connection (output goes there); nil once the job has ended

	state    string
	procs    procTable               // by rank
	nodes    map[int]wire.RankRanges // ranks per node index
	pushed   *wire.JobData           // the job's data as last sent to the daemons (deltas are made from it)
	reg      *pset.Registry
	gen      uint64
	started  time.Time
	ended    time.Time
	launched bool         // the launch round has completed
	early    []earlyExit  // exits that arrived before the launch round completed
	earlyRC  []func()     // resource change requests that arrived before it (rcSubmit)
	live     int          // processes not yet ended
	booking  int          // recordExit calls of this job on the stack (an exit's handling books others: an aborted ADD's unstarted ranks)
	failure  *failure     // first process that failed
	kill     *killOrder   // set once the job is being killed
	timer    *time.Timer  // time limit
	waiters  []waiter     // job.wait requests
	end      wire.JobInfo // final state once done, with Reason and Msg (job.wait's reply)
	done     bool
	pmi      *pmiJob  // PMI service of the job (pmi.go), set by the first node.launch body
	dead     []uint32 // ended ranks still to be taken out of the sets (flushDead)
	removed  removedExits
	policy   string       // failure policy, a wire.OnFailure* value (failure.go)
	shrunk   removedExits // shrink, replace policies: processes lost and removed (or replaced) by failure changes, for the end report
}

// removedExits counts the processes removed by a SUB that did not leave
// cleanly (non-zero exit, signal, or killed after the grace period): not
// failures of the job, but reported with its end.
type removedExits struct {
	n     int
	first string
}

func (j *job) noteRemoved(desc string) {
	if j.removed.n == 0 {
		j.removed.first = desc
	}
	j.removed.n++
}

type jproc struct {
	node    int
	pid     int
	state   string
	code    int
	sig     int
	started int64
	ended   int64
}

type earlyExit struct {
	ev   wire.ProcExited
	note string
}

type failure struct {
	rank uint32
	code int
	msg  string
	how  string // wire.Fail* value
}

// killOrder says how and why a job is killed.
type killOrder struct {
	reason string
	sig    syscall.Signal // first signal (0 = SIGTERM)
	grace  time.Duration  // before SIGKILL (0 = the master's default)
	code   int            // exit status to report (abort)
	msg    string         // detail for the report
}

type waiter struct {
	p     *peer // may be nil
	reply func(waitResult, error)
}

type waitResult struct {
	end     wire.JobInfo
	flushed <-chan struct{} // closed once the waiter's connection got every event queued before the end
}

// jobInfo describes j for tools.
func (s *state) jobInfo(j *job, withProcs bool) wire.JobInfo {
	in := wire.JobInfo{
		ID: j.id, Job: j.ns, App: j.app, State: j.state, Argv: j.req.Argv, Size: uint32(j.live),
		NextRank: uint32(j.procs.len()), Started: j.started.UnixNano(), Placement: s.placement(j),
		Delta: s.rcDelta(j), OnFailure: j.policy,
	}
	if j.done {
		in.Code = j.end.Code
		in.Ended = j.ended.UnixNano()
	}
	if withProcs {
		in.Procs = make([]wire.ProcInfo, 0, j.procs.len())
		j.procs.each(func(r uint32, p *jproc) {
			in.Procs = append(in.Procs, wire.ProcInfo{
				Rank: r, Node: s.nodes[p.node].name, PID: p.pid, State: p.state, Code: p.code,
				Signal: p.sig, Started: p.started, Ended: p.ended,
			})
		})
	}
	return in
}

func (s *state) placement(j *job) []wire.Placement {
	var out []wire.Placement
	for _, n := range s.nodes {
		if rr, ok := j.nodes[n.idx]; ok {
			// A copy: replies and pushes are encoded off the loop, while the
			// loop goes on changing j.nodes in place (RankRanges.Add).
			out = append(out, wire.Placement{Node: n.name, Ranks: slices.Clone(rr)})
		}
	}
	return out
}

func (s *state) jobData(j *job) *wire.JobData {
	return &wire.JobData{
		Gen: j.gen, ID: j.id, Job: j.ns, App: j.app, Size: uint32(j.procs.len()),
		NextRank: uint32(j.procs.len()), Placement: s.placement(j),
	}
}

// setInfo describes the latest version of a set for a push, with members.
func setInfo(r *pset.Registry, job, name string, t int64) (wire.PsetInfo, error) {
	in, err := refInfo(r, job, name, true)
	if err != nil {
		return wire.PsetInfo{}, err
	}
	in.Time = t
	return *in, nil
}

// appName derives a unique application name: --name or the program's base
// name, reduced to the pset name alphabet and suffixed with -<job number>
// when a live job already uses it.
func (s *state) appName(req *wire.JobLaunchReq, id uint32) string {
	base := req.Name
	if base == "" {
		base = path.Base(req.Argv[0])
	}
	b := []byte(base)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	name := string(b)
	suffix := "-" + strconv.FormatUint(uint64(id), 10)
	if len(name) > pset.MaxAppLen-len(suffix) {
		name = name[:pset.MaxAppLen-len(suffix)]
	}
	if allDots(name) {
		name = "app"
	}
	if s.apps[name] {
		name += suffix
	}
	return name
}

func allDots(s string) bool {
	for i := range len(s) {
		if s[i] != '.' {
			return false
		}
	}
	return true
}

func (m *Master) handleLaunch(ctx context.Context, req *wire.Request, b *wire.JobLaunchReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.JobLaunchReply, error)) {
		s.launch(req.Conn, b, reply)
	})
}

// nodeCall is one call of a launch round.
type nodeCall struct {
	node  int
	kind  string
	body  any
	ranks wire.RankRanges
	rep   wire.LaunchReply
	err   error
}

// launch places a job, then sends one round of concurrent calls: the ranks
// (with the job data and sets) to every node that runs some, the job data
// and sets to the others. launchDone finishes the job's start on the loop.
func (s *state) launch(c *wire.Conn, b *wire.JobLaunchReq, reply func(*wire.JobLaunchReply, error)) {
	if s.stopping {
		reply(nil, wire.Errorf(wire.ErrState, "master: DVM %s is stopping", s.id))
		return
	}
	p, err := s.peerOf(c)
	if err != nil {
		reply(nil, err)
		return
	}
	if b.N == 0 {
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: a job needs at least one process"))
		return
	}
	if len(b.Argv) == 0 || b.Argv[0] == "" {
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: no program to launch"))
		return
	}
	if b.TimeoutMS < 0 {
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: negative time limit %d ms", b.TimeoutMS))
		return
	}
	mapBy, err := alloc.ParseMapBy(b.MapBy)
	if err != nil {
		reply(nil, err)
		return
	}
	if err := checkPMIMode(b.PMI); err != nil {
		reply(nil, err)
		return
	}
	if b.Universe < wire.UniverseSlots {
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: universe size %d: want a positive number, 0 (unset) or %d (the DVM's slots)", b.Universe, wire.UniverseSlots))
		return
	}
	policy, err := failurePolicy(b)
	if err != nil {
		reply(nil, err)
		return
	}
	id := s.lastJob + 1
	ns := s.id + "." + strconv.FormatUint(uint64(id), 10)
	placed, err := s.place(ns, int(b.N), alloc.Options{MapBy: mapBy, Oversubscribe: b.Oversubscribe})
	if err != nil {
		if errors.Is(err, wire.ErrNoResources) && int(b.N) > s.alloc.Free() {
			err = wire.Errorf(wire.ErrNoResources, "master: cannot start %d processes: only %d of %d slots are free (--oversubscribe places more)", b.N, s.alloc.Free(), s.alloc.Total())
		}
		reply(nil, err)
		return
	}
	for _, pr := range placed {
		if n := s.nodes[pr.Node]; !n.up {
			_ = s.alloc.ReleaseJob(ns)
			reply(nil, wire.Errorf(wire.ErrNoResources, "master: cannot start %d processes: node %s, where they would go, is down", b.N, n.name))
			return
		}
	}
	if b.PMI, err = pmiSelect(b, s.withoutPMIx(placed)); err != nil {
		_ = s.alloc.ReleaseJob(ns)
		reply(nil, err)
		return
	}
	s.lastJob = id
	app := s.appName(b, id)
	ranks := make([]uint32, len(placed))
	for i, pr := range placed {
		ranks[i] = pr.Rank
	}
	reg, err := pset.New(app, ranks)
	if err != nil {
		_ = s.alloc.ReleaseJob(ns)
		reply(nil, wire.Errorf(wire.ErrInvalid, "master: %w", err))
		return
	}
	now := time.Now()
	j := &job{
		id: id, ns: ns, app: app, req: *b, owner: p, state: wire.JobStateLaunching,
		nodes: make(map[int]wire.RankRanges), reg: reg,
		gen: 1, started: now, live: len(placed), policy: policy,
	}
	j.req.KeepGoing = policy == wire.OnFailureContinue // PMI's fault notification follows it
	for _, pr := range placed {
		j.procs.add(jproc{node: pr.Node, state: wire.ProcStateLaunching}) // placed is in rank order from 0
		j.nodes[pr.Node] = j.nodes[pr.Node].Add(pr.Rank)
	}
	s.jobs[ns] = j
	s.order = append(s.order, j)
	s.apps[app] = true
	s.live++
	p.jobs[j] = struct{}{}
	if b.TimeoutMS > 0 {
		m := s.m
		j.timer = time.AfterFunc(time.Duration(b.TimeoutMS)*time.Millisecond, func() {
			m.post(func(s *state) {
				s.killJob(j, killOrder{reason: reasonTimeout, msg: fmt.Sprintf("time limit of %v reached", time.Duration(b.TimeoutMS)*time.Millisecond)})
			})
		})
	}

	data := s.jobData(j)
	push := &wire.PsetPush{Job: ns}
	for _, name := range []string{pset.NameWorld, pset.AppName(app)} {
		in, err := setInfo(reg, ns, name, now.UnixNano())
		if err != nil {
			s.log.Error("master: cannot describe a predefined set", "set", name, "err", err)
			continue
		}
		push.Defined = append(push.Defined, in)
	}
	for i := range push.Defined {
		in := push.Defined[i]
		in.Members = nil
		s.publish(wire.Event{Kind: wire.EvPsetDef, Job: ns, Pset: &in})
	}
	// Every node gets the same request, encoded once: each daemon starts
	// the ranks the data places on it (Mine). Per node, the data (an
	// entry per node) would cost the master O(nodes²) to encode.
	start := share(&wire.LaunchReq{
		Job: ns, App: app, ID: id, Argv: b.Argv, Env: b.Env, Wdir: b.Wdir, Output: b.Output,
		Stdin: b.Stdin, // only rank 0 reads it (daemon stdin.go)
		Data:  data, Psets: push, PMI: s.pmiLaunch(j), Mine: true,
	})
	var others *sharedBody
	if j.everywhere() {
		jd := *data // a copy: data also rides along node.launch, without sets of its own
		jd.Psets = push
		others = share(&jd)
	}
	radix := s.m.cfg.TreeRadix
	var calls, direct, relayed []*nodeCall
	var tree []*node
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		call := &nodeCall{node: n.idx}
		if rr, ok := j.nodes[n.idx]; ok {
			call.kind, call.ranks, call.body = wire.KindNodeLaunch, rr, start
			if radix > 0 && s.relayReady(n) {
				tree, relayed = append(tree, n), append(relayed, call)
			} else {
				direct = append(direct, call)
			}
		} else {
			if others == nil {
				continue // only the daemons of j's nodes hold it (node.hasJob)
			}
			call.kind, call.body = wire.KindNodeJobData, others
			direct = append(direct, call)
		}
		n.sentJobData(ns, data.Gen)
		j.pushed = data
		calls = append(calls, call)
	}
	left := 1 + len(relayed) // the direct round, and each relayed node
	finished := func(s *state) {
		if left--; left == 0 {
			s.launchDone(j, calls, reply)
		}
	}
	if len(tree) <= radix || !s.relayLaunch(j, start, tree, relayed, finished) {
		direct, left = calls, 1 // too few for a tree: one call each
	}
	s.callRound(direct, finished)
}

// relayLaunch sends the launch start to nodes down the tree of daemons
// (tree.go) and books each node's outcome into its call of calls, then
// runs each once that node is settled. It returns false, having done
// nothing, if start cannot be encoded.
func (s *state) relayLaunch(j *job, start *sharedBody, nodes []*node, calls []*nodeCall, each func(s *state)) bool {
	raw, err := start.bytes()
	if err != nil {
		return false
	}
	st := s.rcs()
	byNode := make(map[int]*nodeCall, len(calls))
	for i, n := range nodes {
		s.queueOf(n).busy = true // what the loop sends n next waits behind the launch (sendNode)
		byNode[n.idx] = calls[i]
	}
	settled := make(map[int]bool, len(nodes))
	st.relaySeq++
	s.relay(st.relaySeq, s.m.cfg.TreeRadix, j.ns, wire.KindNodeLaunch, raw, nodes, func(s *state, f *relayFlight, i int, err error) {
		n := f.nodes[i]
		q := s.rc.queues[n.idx]
		q.busy, q.flight, q.relay = false, nil, nil
		c := byNode[n.idx]
		settled[n.idx] = true
		if err == nil && !n.up && len(c.rep.Started) == 0 {
			err = wire.Errorf(wire.ErrClosed, "master: node %s went down during the launch of job %s", n.name, j.ns)
		}
		c.err = err
		s.pump(n.idx)
		each(s)
	}, s.markRelay, func(s *state, rep *wire.NodeRelayReply) {
		for _, ps := range rep.Started {
			p := j.procs.at(ps.Rank)
			if p == nil || ps.Job != j.ns || settled[p.node] {
				continue // not this job's, or that node's answer is in (a late copy)
			}
			if c := byNode[p.node]; c != nil {
				c.rep.Started = append(c.rep.Started, ps)
			}
		}
	}, nil)
	return true
}

// startCode maps a failed launch call to an exit code like a shell's.
func startCode(err error) int {
	switch {
	case errors.Is(err, wire.ErrNotFound):
		return 127
	case errors.Is(err, wire.ErrPermission):
		return 126
	}
	return 1
}

func (s *state) launchDone(j *job, calls []*nodeCall, reply func(*wire.JobLaunchReply, error)) {
	j.launched = true
	if !j.done {
		j.state = wire.JobStateRunning
	}
	s.publish(wire.Event{Kind: wire.EvJobState, Job: j.ns, State: wire.JobStateRunning})
	reply(&wire.JobLaunchReply{ID: j.id, Job: j.ns, App: j.app, Placement: s.placement(j)}, nil)

	for _, c := range calls {
		if c.kind != wire.KindNodeLaunch {
			if c.err != nil {
				s.log.Warn("master: cannot send job data", "node", s.nodes[c.node].name, "job", j.ns, "err", c.err)
			}
			continue
		}
		var running wire.RankRanges
		for _, st := range c.rep.Started {
			if p := j.procs.at(st.Rank); p != nil {
				p.pid, p.started = st.PID, st.Time
				if p.state == wire.ProcStateLaunching {
					p.state = wire.ProcStateRunning
				}
				running = running.Add(st.Rank)
			}
		}
		if len(running) > 0 {
			s.publish(wire.Event{Kind: wire.EvProcState, Job: j.ns, Ranks: running, Node: s.nodes[c.node].name, State: wire.ProcStateRunning})
		}
		if c.err != nil {
			for r := range c.ranks.All() {
				s.recordExit(j, wire.ProcExited{
					Job: j.ns, Rank: r, Node: s.nodes[c.node].name, Code: startCode(c.err), Err: c.err.Error(),
				}, "")
			}
		}
	}
	early := j.early
	j.early = nil
	for _, e := range early {
		s.recordExit(j, e.ev, e.note)
	}
	// Nodes lost while the round was in flight.
	for idx := range j.nodes {
		if n := s.nodes[idx]; !n.up {
			s.loseRanks(j, n)
		}
	}
	if j.kill != nil && !j.done {
		s.sendKill(j, nil)
	}
	held := j.earlyRC
	j.earlyRC = nil
	for _, submit := range held {
		submit()
	}
}

// procExited handles a proc.exited event from a daemon.
func (s *state) procExited(ev wire.ProcExited) {
	j := s.jobs[ev.Job]
	if j == nil || j.done {
		return
	}
	s.recordExit(j, ev, "")
}

// recordExit books the end of one process. Exits that arrive before the
// launch round has completed wait, so that events and states follow the
// order launched → exited → ended. note, when set, replaces the
// description of how the process ended.
func (s *state) recordExit(j *job, ev wire.ProcExited, note string) {
	if !j.launched {
		j.early = append(j.early, earlyExit{ev, note})
		return
	}
	p := j.procs.at(ev.Rank)
	if j.done || p == nil {
		return
	}
	switch p.state {
	case wire.ProcStateExited, wire.ProcStateFailed, wire.ProcStateKilled:
		return // reported twice (e.g. lost with its node, then the exit)
	}
	p.code, p.sig = ev.Code, ev.Signal
	p.ended = ev.Time
	if p.ended == 0 {
		p.ended = time.Now().UnixNano()
	}
	if ev.PID != 0 {
		p.pid = ev.PID
	}
	switch {
	case ev.Err != "":
		p.state = wire.ProcStateFailed
	case ev.Forced || note != "":
		p.state = wire.ProcStateKilled
	default:
		p.state = wire.ProcStateExited
	}
	j.live--
	if rr := j.nodes[p.node]; len(rr) > 0 {
		// Keep the live placement current (JobInfo.Placement).
		j.nodes[p.node] = removeRank(rr, ev.Rank)
		if len(j.nodes[p.node]) == 0 {
			delete(j.nodes, p.node)
		}
	}
	node := s.nodes[p.node].name
	msg := ev.Err
	if note != "" {
		msg = note
	}
	s.publish(wire.Event{
		Kind: wire.EvProcState, Job: j.ns, Ranks: wire.Span(ev.Rank, ev.Rank), Node: node,
		State: p.state, Code: ev.Code, Signal: ev.Signal, Msg: msg,
	})
	s.releaseSlots(j, []uint32{ev.Rank}) // a dead process holds no slot (invariant b)
	failed := ev.Err != "" || note != "" || (!ev.Forced && (ev.Code != 0 || ev.Signal != 0))
	abnormal := failed
	// rcProcExit may abort a change, which books the exits of the ADD's
	// unstarted ranks in a nested recordExit. Only the outermost call may
	// end the job: the nested one could bring live to 0 before this exit's
	// failure is booked, and the job would end "done" with status 0.
	j.booking++
	defer func() { j.booking-- }()
	if s.rcProcExit(j, ev.Rank, describeExit(ev.Rank, node, ev, note), failed || ev.Forced) {
		failed = false // a process a resource change adds or removes (rc.go)
	}
	if failed && j.lossChanges() && ev.Err == "" &&
		s.shrinkLoss(j, lostRank{rank: ev.Rank, node: node, why: describeExit(ev.Rank, node, ev, note), how: failHow(ev, note), code: ev.Code}) {
		failed = false // a failure change takes it over, or the job ends with the loss's report (failure.go)
	}
	if failed && (j.failure == nil || s.pmiDiedBefore(j, ev.Rank, j.failure.rank)) {
		first := j.failure == nil
		j.failure = &failure{rank: ev.Rank, code: ev.Code, msg: describeExit(ev.Rank, node, ev, note), how: failHow(ev, note)}
		if first && j.policy != wire.OnFailureContinue {
			s.killJob(j, killOrder{reason: reasonFailed})
		}
	}
	if j.live == 0 {
		if j.booking == 1 {
			s.endJob(j)
		}
		return
	}
	if abnormal {
		s.dropDead(j, ev.Rank)
	}
}

// releaseSlots frees the slots the given ranks of j still hold (a rank
// frees its slot once: when it ends, or with its change).
func (s *state) releaseSlots(j *job, ranks []uint32) {
	var held []uint32
	for _, r := range ranks {
		if _, ok := s.alloc.Proc(j.ns, r); ok {
			held = append(held, r)
		}
	}
	if len(held) == 0 {
		return
	}
	if err := s.alloc.Release(j.ns, held); err != nil {
		s.log.Error("master: cannot free the slots of ended processes", "job", j.ns, "err", err)
	}
}

// dropDead queues a rank that failed (or was lost) to be taken out of the
// job's sets, so that no set lists a process that died (invariant a) and
// no later change waits for it. A process that ends by itself with status
// 0 stays a member: it finished its part, as a finalized process stays in
// MPI_COMM_WORLD, and its peers may still read the set as it was. Exits come in bursts (a job ending, a node lost):
// one flush, posted from a goroutine since the loop never posts, takes out
// every rank queued by then (a job being killed too: it runs until its
// last process is gone, and its sets must not list the dead meanwhile).
func (s *state) dropDead(j *job, rank uint32) {
	if j.done {
		return
	}
	j.dead = append(j.dead, rank)
	if len(j.dead) == 1 {
		m := s.m
		go m.post(func(s *state) { s.flushDead(j) })
	}
}

// flushDead takes the queued dead ranks of j out of its sets now (also
// called before a change snapshots sets, so that it never counts on them).
func (s *state) flushDead(j *job) {
	if len(j.dead) == 0 {
		return
	}
	dead := j.dead
	j.dead = nil
	if j.done {
		return
	}
	s.rcPushSets(j, j.reg.DropRanks(dead), nil)
}

func removeRank(rr wire.RankRanges, r uint32) wire.RankRanges {
	out := make(wire.RankRanges, 0, len(rr)+1)
	for _, g := range rr {
		switch {
		case r < g.Lo || r > g.Hi:
			out = append(out, g)
		case g.Lo == g.Hi:
		case r == g.Lo:
			out = append(out, wire.RankRange{Lo: g.Lo + 1, Hi: g.Hi})
		case r == g.Hi:
			out = append(out, wire.RankRange{Lo: g.Lo, Hi: g.Hi - 1})
		default:
			out = append(out, wire.RankRange{Lo: g.Lo, Hi: r - 1}, wire.RankRange{Lo: r + 1, Hi: g.Hi})
		}
	}
	return out
}

// failHow classifies a failed process's end (JobInfo.Failure).
func failHow(ev wire.ProcExited, note string) string {
	switch {
	case ev.Err != "":
		return wire.FailStart
	case note != "" || ev.Signal != 0:
		return wire.FailSignal
	}
	return wire.FailExit
}

// describeExit says how a process ended, for the job's one-line report.
func describeExit(rank uint32, node string, ev wire.ProcExited, note string) string {
	var how string
	switch {
	case note != "":
		how = note
	case ev.Err != "":
		how = "could not start: " + ev.Err
	default:
		how = proc.ExitStatus{ExitCode: ev.Code, Signal: syscall.Signal(ev.Signal)}.String()
	}
	return fmt.Sprintf("rank %d on %s %s", rank, node, how)
}

// loseRanks ends the processes of j on a node whose daemon is gone: they
// count as killed by SIGKILL.
func (s *state) loseRanks(j *job, n *node) {
	rr, ok := j.nodes[n.idx]
	if !ok {
		return
	}
	for r := range slices.Clone(rr).All() {
		s.recordExit(j, wire.ProcExited{Job: j.ns, Rank: r, Node: n.name, Code: 128 + int(syscall.SIGKILL), Signal: int(syscall.SIGKILL)},
			"was lost with its node (daemon gone)")
	}
}

// killJob starts killing j. The first order decides the reason; a later
// one re-sends its signal (a second Ctrl-C may ask for SIGKILL at once).
func (s *state) killJob(j *job, k killOrder) {
	if k.grace <= 0 {
		k.grace = s.m.grace
	}
	if k.sig == 0 {
		k.sig = syscall.SIGTERM
	}
	s.killSpawned(j, k) // pmi.go: also after j itself has ended
	if j.done {
		return
	}
	first := j.kill == nil
	if first {
		j.kill = &k
	}
	if !j.launched {
		return // launchDone sends it
	}
	if first {
		s.sendKill(j, nil)
	} else {
		s.sendKill(j, &k)
	}
}

// sendKill asks every daemon running processes of j to kill them.
func (s *state) sendKill(j *job, k *killOrder) {
	if k == nil {
		k = j.kill
	}
	req := &wire.KillReq{Job: j.ns, Signal: int(k.sig), GraceMS: k.grace.Milliseconds()}
	for idx := range j.nodes {
		if n := s.nodes[idx]; n.up {
			s.sendNode(n, outMsg{kind: wire.KindNodeKill, body: req})
		}
	}
}

// endJob finishes a job whose last process has ended.
func (s *state) endJob(j *job) {
	if j.done {
		return // a job ends once: a second end would count it twice in s.live, and a later stop would spare a live job
	}
	j.done = true
	j.ended = time.Now()
	if j.timer != nil {
		j.timer.Stop()
	}
	s.rcJobEnded(j) // abort a resource change in flight (rc.go)
	end := wire.JobInfo{}
	reason := ""
	if j.kill != nil {
		reason = j.kill.reason
	}
	switch {
	case reason == reasonFailed || (reason == "" && j.failure != nil):
		j.state = wire.JobStateFailed
	case reason != "":
		j.state = wire.JobStateKilled
	default:
		j.state = wire.JobStateDone
	}
	end.Reason = reason
	label := fmt.Sprintf("job %s (%s)", j.app, j.ns)
	switch {
	case reason == reasonTimeout:
		end.Code = wire.JobCodeTimeout
		end.Msg = fmt.Sprintf("%s killed: %s", label, j.kill.msg)
	case reason == reasonAbort:
		end.Code = j.kill.code
		end.Msg = fmt.Sprintf("%s aborted: %s", label, j.kill.msg)
	case j.failure != nil:
		end.Code = j.failure.code
		end.Msg = fmt.Sprintf("%s: %s", label, j.failure.msg)
		if reason == reasonFailed {
			end.Msg += "; the other processes were terminated"
		}
	case reason == reasonKill:
		end.Code = 128 + int(j.kill.sig)
		end.Msg = label + " killed on request"
	case reason == reasonStop:
		end.Code = 128 + int(j.kill.sig)
		end.Msg = label + " killed: the DVM was stopped"
	case reason == reasonLost:
		end.Code = 128 + int(j.kill.sig)
		end.Msg = label + " killed: its launcher went away"
	}
	if end.Code == 0 && j.state != wire.JobStateDone {
		end.Code = 1 // a failure must never read as success
	}
	if j.state == wire.JobStateDone && j.removed.n > 0 {
		// Not a failure (a SUB had removed them), but not silent either.
		end.Msg = fmt.Sprintf("%s done; %d removed process(es) did not leave cleanly (not a failure of the job): %s",
			label, j.removed.n, j.removed.first)
	}
	if j.state == wire.JobStateDone && j.shrunk.n > 0 {
		// Not a failure either: the job shrank past the losses.
		if end.Msg != "" {
			end.Msg += "; "
		} else {
			end.Msg = label + " done; "
		}
		what := "removed by failure changes (--on-failure shrink)"
		if j.policy == wire.OnFailureReplace {
			what = "replaced by new processes through failure changes (--on-failure replace)"
		}
		end.Msg += fmt.Sprintf("%d lost process(es) were %s: %s", j.shrunk.n, what, j.shrunk.first)
	}
	j.end = end // jobInfo reads the code from here
	j.end = s.jobInfo(j, false)
	j.end.Reason, j.end.Msg = end.Reason, end.Msg
	if j.failure != nil {
		j.end.Failure = j.failure.how
	}

	if err := s.alloc.ReleaseJob(j.ns); err != nil {
		s.log.Error("master: cannot free the slots of a job", "job", j.ns, "err", err)
	}
	delete(s.apps, j.app)
	s.live--
	gone := &wire.JobData{Gen: j.gen + 1, ID: j.id, Job: j.ns, Gone: true}
	j.pushed = nil
	for _, n := range s.nodes {
		if n.up && n.hasJob(j) {
			s.sendNode(n, outMsg{kind: wire.KindNodeJobData, body: gone})
		}
		delete(n.jobGen, j.ns)
	}
	s.publish(wire.Event{Kind: wire.EvJobState, Job: j.ns, State: j.state, Code: j.end.Code, Msg: j.end.Msg})
	s.settleWaits(j) // pmi.go: waits for what the job spawned
	if j.owner != nil {
		delete(j.owner.jobs, j)
		j.owner = nil
	}
	s.trimEnded()
	if s.stopping && s.live == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

func (s *state) answerWait(j *job, w waiter) {
	var flushed <-chan struct{}
	if w.p != nil && w.p.q != nil {
		flushed = w.p.q.barrier()
	}
	w.reply(waitResult{end: s.waitEnd(j), flushed: flushed}, nil)
}

// trimEnded forgets the oldest ended jobs beyond maxEnded.
func (s *state) trimEnded() {
	ended := 0
	for _, j := range s.order {
		if j.done {
			ended++
		}
	}
	if ended <= maxEnded {
		return
	}
	keep := s.order[:0]
	for _, j := range s.order {
		if j.done && ended > maxEnded {
			ended--
			delete(s.jobs, j.ns)
			continue
		}
		keep = append(keep, j)
	}
	clear(s.order[len(keep):])
	s.order = keep
}

func (s *state) job(ns string) (*job, error) {
	j := s.jobs[ns]
	if j == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "master: DVM %s has no job %q", s.id, ns)
	}
	return j, nil
}

func (m *Master) handleWait(ctx context.Context, req *wire.Request, b *wire.JobWaitReq) (any, error) {
	if b.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(b.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	res, err := ask(ctx, m, func(s *state, reply func(waitResult, error)) {
		j, err := s.job(b.Job)
		if err != nil {
			reply(waitResult{}, err)
			return
		}
		w := waiter{p: s.peers[req.Conn], reply: reply}
		if j.done && !s.spawnedLive(j) {
			s.answerWait(j, w)
			return
		}
		j.waiters = append(j.waiters, w)
	})
	if err != nil {
		return nil, err
	}
	if res.flushed != nil {
		select {
		case <-res.flushed:
		case <-ctx.Done():
			return nil, wire.Errorf(wire.ErrCanceled, "master: job.wait: %w", ctx.Err())
		}
	}
	return &res.end, nil
}

func (m *Master) handleKill(ctx context.Context, _ *wire.Request, b *wire.JobKillReq) (any, error) {
	if b.Signal < 0 || b.Signal > 64 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: bad signal %d", b.Signal)
	}
	return nil, do(ctx, m, func(s *state) error {
		j, err := s.job(b.Job)
		if err != nil {
			return err
		}
		if j.done && !s.spawnedLive(j) {
			return wire.Errorf(wire.ErrState, "master: job %s has already ended (%s)", j.ns, j.state)
		}
		s.killJob(j, killOrder{reason: reasonKill, sig: syscall.Signal(b.Signal), grace: time.Duration(b.GraceMS) * time.Millisecond})
		return nil
	})
}

// handleAbort serves session.abort relayed by a daemon: the caller's whole
// job, or the listed processes, are killed.
func (m *Master) handleAbort(ctx context.Context, _ *wire.Request, b *wire.AbortReq) (any, error) {
	return nil, do(ctx, m, func(s *state) error {
		j, err := s.job(b.Job)
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("rank %d called abort", b.Rank)
		if b.Msg != "" {
			msg += ": " + b.Msg
		}
		if len(b.Procs) == 0 {
			// Like mpiexec, which exits at an abort and takes every
			// process it started with it: the whole spawn tree goes,
			// from the job its launcher started (killJob passes the
			// order down to what that job spawned).
			root := spawnRoot(j)
			if root != j {
				msg = fmt.Sprintf("rank %d of job %s (which job %s spawned) called abort", b.Rank, j.ns, root.ns)
				if b.Msg != "" {
					msg += ": " + b.Msg
				}
			}
			s.killJob(root, killOrder{reason: reasonAbort, code: b.Status, msg: msg})
			return nil
		}
		for _, pr := range b.Procs {
			if pr.Job != "" && pr.Job != b.Job {
				return wire.Errorf(wire.ErrPermission, "master: rank %d of job %s may not abort processes of job %s", b.Rank, b.Job, pr.Job)
			}
			t, err := s.job(b.Job)
			if err != nil {
				return err
			}
			if t.done {
				continue
			}
			s.killRanks(t, &wire.KillReq{Ranks: pr.Ranks, Signal: int(syscall.SIGTERM), GraceMS: s.m.grace.Milliseconds()})
		}
		return nil
	})
}

// killRanks sends req (its Job set to t's) to every live node of t.
func (s *state) killRanks(t *job, req *wire.KillReq) {
	req.Job = t.ns
	for idx := range t.nodes {
		if n := s.nodes[idx]; n.up {
			s.sendNode(n, outMsg{kind: wire.KindNodeKill, body: req})
		}
	}
}

// output forwards a line to the tool that launched its job.
func (s *state) output(line *wire.OutputLine) {
	j := s.jobs[line.Job]
	if j == nil || j.owner == nil || j.owner.closed || !j.req.Output.Forward {
		return
	}
	if !j.owner.queue().push(wire.KindProcOutput, line) {
		if j.owner.dropped == 0 {
			s.log.Warn("master: launcher does not keep up with output; dropping lines", "job", j.ns)
		}
		j.owner.dropped++
	}
}

// beginStop kills every live job; the returned channel is closed once none
// is left.
func (s *state) beginStop(grace time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	s.stopping = true
	if s.live == 0 {
		close(ch)
		return ch
	}
	s.drained = ch
	for _, j := range s.order {
		if !j.done {
			s.killJob(j, killOrder{reason: reasonStop, grace: grace})
		}
	}
	return ch
}
