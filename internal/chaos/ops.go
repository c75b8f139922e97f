package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// maxJobs bounds the jobs running at once: a launch beyond it ends the
// oldest first.
const maxJobs = 3

// step runs one step: its operation, with its fault injected at the
// moment that fault is about.
func (h *harness) step(ctx context.Context, s Step) error {
	f := h.startFault(ctx, s)
	defer f.end()
	j := h.pickJob(s.JobPick, nil)
	op := s.Op
	if j == nil && op != OpLaunch && op != OpIdle && op != OpGrow && op != OpShrink {
		h.note("no job: launch instead of %s", op)
		op, s.Count = OpLaunch, 2
	}
	switch op {
	case OpLaunch:
		if h.running() >= maxJobs {
			h.endJob(h.pickJob(0, nil))
		}
		err := h.launch(ctx, s)
		if n := len(h.jobs); err == nil && n > 0 {
			f.launched(h.jobs[n-1])
		}
		return err
	case OpAdd:
		bound := h.bound(j, s)
		confirm := h.cfg.ConfirmTimeout
		if s.Fault == FaultConfirmTimeout {
			confirm = time.Second
		}
		rc, ok := h.request(ctx, j, wire.RCRequest{Type: wire.RCAdd, N: uint32(s.Count), Bound: bound}, confirm)
		if ok {
			f.change(ctx, j, rc)
		}
	case OpSub, OpSubRanks:
		req := wire.RCRequest{Type: wire.RCSub, N: uint32(s.Count), Bound: h.bound(j, s)}
		if op == OpSubRanks {
			ranks := h.pickRanks(ctx, j, req.Bound, s)
			if len(ranks) == 0 {
				h.note("job %s: no ranks to remove", j.app)
				f.change(ctx, j, wire.RC{})
				return nil
			}
			req.N, req.Ranks = 0, wire.RangesOf(ranks)
		}
		rc, ok := h.request(ctx, j, req, h.cfg.ConfirmTimeout)
		if ok {
			f.change(ctx, j, rc)
		}
	case OpReplace:
		rc, ok := h.request(ctx, j, wire.RCRequest{Type: wire.RCReplace, N: uint32(s.Count), Bound: h.bound(j, s)}, h.cfg.ConfirmTimeout)
		if ok {
			f.change(ctx, j, rc)
		}
	case OpCancel:
		typ := wire.RCAdd
		if s.CancelSub {
			typ = wire.RCSub
		}
		rc, ok := h.request(ctx, j, wire.RCRequest{Type: typ, N: 1, Bound: h.bound(j, s)}, h.cfg.ConfirmTimeout)
		if ok {
			f.change(ctx, j, rc)
			time.Sleep(s.Delay)
			var out wire.RC
			err := h.d.cl.Conn().Call(ctx, wire.KindRCCancel, &wire.RCCancelReq{Delta: rc.Delta, Reason: "chaos cancel"}, &out)
			h.note("cancel %s after %s: %s", rc.Delta, s.Delay, errOr(err, out.Status))
		}
	case OpConcurrent:
		h.concurrent(ctx, j, s, f)
	case OpEnd:
		h.endJob(j)
	case OpIdle:
		f.change(ctx, j, wire.RC{})
	case OpGrow:
		nodes, err := h.d.cl.Grow(ctx, wire.DVMGrowReq{Nodes: 1, Slots: uint32(h.cfg.Slots)})
		if err != nil {
			h.sum.Refused++
			h.note("grow refused: %v", err)
		} else {
			h.note("grow: %s joined", nodes[0].Name)
		}
		f.change(ctx, j, wire.RC{})
	case OpShrink:
		h.shrink(ctx, s)
		f.change(ctx, j, wire.RC{})
	}
	return nil
}

// shrink takes a node other than node 0 out with --drain, preferably one
// where processes run: the jobs there get a SUB of their ranks on it,
// which the malleable program accepts.
func (h *harness) shrink(ctx context.Context, s Step) {
	st, err := h.d.cl.State(ctx)
	if err != nil || len(st.Nodes) < 2 {
		h.note("shrink: no node to take out")
		return
	}
	// A node where processes run, when there is one: that is what a drain
	// is about; better still one that each job there also runs beyond,
	// which the master can drain (it refuses to take a job's every
	// process: that is for the refusal steps, when no other node is
	// busy).
	cands := st.Nodes[1:]
	var busy, drainable []wire.NodeInfo
	for _, n := range cands {
		if n.Used > 0 {
			busy = append(busy, n)
			if drainableNode(st, n.Name) {
				drainable = append(drainable, n)
			}
		}
	}
	switch {
	case len(drainable) > 0:
		cands = drainable
	case len(busy) > 0:
		cands = busy
	}
	name := cands[int(s.NodePick%uint32(len(cands)))].Name
	rep, err := h.d.cl.Shrink(ctx, wire.DVMShrinkReq{Node: name, Drain: true, TimeoutMS: h.cfg.ConfirmTimeout.Milliseconds()})
	for _, rc := range rep.Drained {
		h.limits[rc.Delta] = h.cfg.ConfirmTimeout + changeSlack
		h.sum.Drained++
	}
	if err != nil {
		h.sum.Refused++
		h.note("shrink %s --drain refused: %v", name, err)
		return
	}
	var ds []string
	for _, rc := range rep.Drained {
		ds = append(ds, rc.Delta+" "+rc.Ranks.String())
	}
	h.note("shrink %s --drain: left (drained: %s)", name, strings.Join(ds, ", "))
}

// drainableNode reports whether every running job with processes on node
// also has processes on another node.
func drainableNode(st wire.DVMState, node string) bool {
	for _, j := range st.Jobs {
		if j.State != wire.JobStateRunning {
			continue
		}
		here, elsewhere := false, false
		for _, pl := range j.Placement {
			if len(pl.Ranks) == 0 {
				continue
			}
			if pl.Node == node {
				here = true
			} else {
				elsewhere = true
			}
		}
		if here && !elsewhere {
			return false
		}
	}
	return true
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func (h *harness) running() int {
	n := 0
	for _, j := range h.jobs {
		if !j.exited() {
			n++
		}
	}
	return n
}

// launch starts a malleable job with dynrun and waits until it runs.
func (h *harness) launch(ctx context.Context, s Step) error {
	h.nextID++
	app := "j" + itoa(h.nextID)
	if s.Split && h.freeNodes(ctx) < 2 {
		// The job splits by node (rank 0's, the others'): on one node it
		// would make an empty set and fail, which is the test program's
		// limit, not the runtime's.
		h.note("split %s: fewer than two nodes with a free slot, launched whole", app)
		s.Split = false
	}
	args := []string{"--dvm", h.d.id, "-n", itoa(s.Count), "--name", app}
	// Under shrink and replace alike a loss is a failure change, not a
	// failure of the job (the exit rule and invariant (g) are the same).
	shrink := h.cfg.Policy == wire.OnFailureShrink || h.cfg.Policy == wire.OnFailureReplace
	switch {
	case shrink:
		args = append(args, "--on-failure", h.cfg.Policy)
		s.KeepGoing = false
	case s.KeepGoing:
		args = append(args, "--keep-going")
	}
	if s.Split {
		// The job splits by node (rank 0's and the others): spread it.
		args = append(args, "--map-by", "node")
	}
	// -wireup: the launch's processes fence with collect first, so that
	// a fence's data travels (down the tree too) under the faults.
	args = append(args, h.cfg.Malleable, "-timeout", "1000h", "-wireup")
	if s.Split {
		args = append(args, "-split")
	}
	if s.Request != "" {
		args = append(args, "-requests", s.Request)
	}
	cmd := exec.Command(h.cfg.Dynrun, args...)
	cmd.Env = h.env()
	j := &jobRun{app: app, split: s.Split, keepGoing: s.KeepGoing, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	j.facts.KeepGoing, j.facts.Shrink = s.KeepGoing, shrink
	cmd.Stdout, cmd.Stderr = j.out, j.out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start dynrun: %w", err)
	}
	h.jobs = append(h.jobs, j)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			j.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				j.code = 128 + int(ws.Signal())
			}
		}
		close(j.done)
	}()
	// The job runs once the master lists it running (its namespace is
	// then known) and, split, once its sets are made.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(30 * time.Millisecond) {
		if j.exited() {
			// dynrun says "launch: cannot start ..." when the master
			// refused, "rank R on N could not start: ..." when a node was
			// lost while the job started.
			out := j.out.String()
			j.facts.NotRun = strings.Contains(out, "launch: ") || strings.Contains(out, "could not start")
			h.note("launch %s: dynrun exited %d: %s", app, j.code, lastLines(j.out.String(), 3))
			return nil
		}
		jobs, err := h.d.cl.Jobs(ctx, false)
		if err != nil {
			return err
		}
		for _, ji := range jobs {
			if ji.App == app && ji.State == wire.JobStateRunning && (!s.Split || strings.Count(j.out.String(), "SPLIT") >= s.Count) {
				j.ns = ji.Job
				h.note("launch %s (%s) n=%d", app, ji.Job, s.Count)
				return nil
			}
		}
	}
	h.note("launch %s: not running after 30s", app)
	return nil
}

// endJob ends j the way a user does: SIGTERM to its dynrun.
func (h *harness) endJob(j *jobRun) {
	if j == nil {
		return
	}
	j.facts.EndedBy, j.facts.EndStep = EndTerm, h.curStep
	for i, f := range j.facts.Failures {
		if f.Step == h.curStep {
			// Ended in the step that hit it: dynrun's SIGTERM may
			// overtake the master's news of the failure.
			j.facts.Failures[i].Sure = false
		}
	}
	signal(j.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-j.done:
	case <-time.After(30 * time.Second):
	}
	h.note("end %s", j.app)
}

// bound is the set a change on j binds to: a split job's sets (a or b),
// else the runtime's choice (the application set).
func (h *harness) bound(j *jobRun, s Step) []string {
	if !j.split {
		return nil
	}
	part := "/a"
	if s.ProcPick%2 == 1 {
		part = "/b"
	}
	return []string{"mpi://app/" + j.app + part}
}

// request asks for a change; ok is false if the DVM refused it.
func (h *harness) request(ctx context.Context, j *jobRun, req wire.RCRequest, confirm time.Duration) (wire.RC, bool) {
	req.Job, req.Requester, req.RequesterID = j.ns, wire.ByTool, "chaos"
	req.ConfirmMS, req.GraceMS = confirm.Milliseconds(), 1000
	var rc wire.RC
	err := h.d.cl.Conn().Call(ctx, wire.KindRCRequest, &req, &rc)
	what := fmt.Sprintf("%s %s n=%d ranks=%s bound=%v", j.app, req.Type, req.N, req.Ranks, req.Bound)
	if err != nil {
		h.sum.Refused++
		h.refused = append(h.refused, j.ns)
		h.note("%s refused: %v", what, err)
		return rc, false
	}
	h.limits[rc.Delta] = confirm + changeSlack
	h.note("%s -> %s", what, rc.Delta)
	return rc, true
}

// pickRanks chooses s.Count ranks of j's bound set to remove (never all).
func (h *harness) pickRanks(ctx context.Context, j *jobRun, bound []string, s Step) []uint32 {
	jb, err := h.observeJob(ctx, j.ns)
	if err != nil {
		return nil
	}
	name := "mpi://app/" + j.app
	if len(bound) > 0 {
		name = bound[0]
	}
	var members []uint32
	for _, ps := range jb.Sets {
		if ps.Name == name {
			members = ps.Members
		}
	}
	n := min(s.Count, len(members)-1)
	var out []uint32
	for i := range max(n, 0) {
		k := int((s.ProcPick + uint32(i)*7919) % uint32(len(members)))
		for slices.Contains(out, members[k]) {
			k = (k + 1) % len(members)
		}
		out = append(out, members[k])
	}
	slices.Sort(out)
	return out
}

// concurrent asks for an ADD on j and a SUB on another job at once, and a
// second change of j while its first is in flight (the DVM must refuse
// it as busy or run it after).
func (h *harness) concurrent(ctx context.Context, j *jobRun, s Step, f *fault) {
	k := h.pickJob(s.PeerPick, j)
	var wg sync.WaitGroup
	var rcA wire.RC
	var okA bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		rcA, okA = h.requestQuiet(ctx, j, wire.RCRequest{Type: wire.RCAdd, N: 1, Bound: h.bound(j, s)})
	}()
	if k != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.requestQuiet(ctx, k, wire.RCRequest{Type: wire.RCSub, N: 1, Bound: h.bound(k, s)})
		}()
	}
	wg.Wait()
	h.flushQuiet()
	if okA {
		h.request(ctx, j, wire.RCRequest{Type: wire.RCSub, N: 1, Bound: h.bound(j, s)}, h.cfg.ConfirmTimeout)
		f.change(ctx, j, rcA)
	}
}

// requestQuiet is request for concurrent use: the notes wait in a queue
// flushed by flushQuiet.
func (h *harness) requestQuiet(ctx context.Context, j *jobRun, req wire.RCRequest) (wire.RC, bool) {
	req.Job, req.Requester, req.RequesterID = j.ns, wire.ByTool, "chaos"
	req.ConfirmMS, req.GraceMS = h.cfg.ConfirmTimeout.Milliseconds(), 1000
	var rc wire.RC
	err := h.d.cl.Conn().Call(ctx, wire.KindRCRequest, &req, &rc)
	h.qmu.Lock()
	defer h.qmu.Unlock()
	what := fmt.Sprintf("%s %s n=%d bound=%v (concurrent)", j.app, req.Type, req.N, req.Bound)
	if err != nil {
		h.queued = append(h.queued, queuedNote{what: what + " refused: " + err.Error(), refused: j.ns})
		return rc, false
	}
	h.queued = append(h.queued, queuedNote{what: what + " -> " + rc.Delta, delta: rc.Delta})
	return rc, true
}

type queuedNote struct {
	what    string
	delta   string
	refused string // the job's namespace, if refused
}

func (h *harness) flushQuiet() {
	h.qmu.Lock()
	defer h.qmu.Unlock()
	for _, q := range h.queued {
		h.note("%s", q.what)
		if q.refused != "" {
			h.sum.Refused++
			h.refused = append(h.refused, q.refused)
		}
		if q.delta != "" {
			h.limits[q.delta] = h.cfg.ConfirmTimeout + changeSlack
		}
	}
	h.queued = nil
}

// freeNodes counts the nodes up with a free slot.
func (h *harness) freeNodes(ctx context.Context) int {
	st, err := h.d.cl.State(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, nd := range st.Nodes {
		if nd.State == wire.NodeUp && nd.Used < nd.Slots {
			n++
		}
	}
	return n
}
