package chaos

import (
	"context"
	"fmt"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// fault is the fault of one step being injected: started before the
// operation (daemon faults, hostile clients), aimed at the step's change
// (process faults, confirm timeouts), ended after it (SIGCONT, dvm stop).
type fault struct {
	h       *harness
	s       Step
	t0      time.Time
	stopped []int  // pids to SIGCONT at the end
	node    string // the node whose daemon a daemon fault hit
}

// launched tells the fault of a job launched during it: a job started
// while a daemon is hung or killed may lose its ranks on that node as
// they start (dynrun: "rank R on N could not start", 1) or just after
// (137), or not at all. jobsOn, at the fault's start, could not count it.
func (f *fault) launched(j *jobRun) {
	if f.node == "" || j == nil {
		return
	}
	what := fmt.Sprintf("launched during %s of %s", f.s.Fault, f.node)
	j.facts.Failures = append(j.facts.Failures,
		JobFailure{Code: 1, Step: f.s.N, What: what + ": a rank there could not start"},
		JobFailure{Code: SigKilled, Step: f.s.N, What: what + ": a rank there was lost"})
}

func (h *harness) startFault(ctx context.Context, s Step) *fault {
	f := &fault{h: h, s: s, t0: time.Now()}
	switch s.Fault {
	case FaultKillDaemon, FaultHangDaemon:
		n, pid := h.pickDaemon(ctx, s.NodePick)
		if pid == 0 {
			h.note("no daemon to %s", s.Fault)
			return f
		}
		sig := syscall.SIGKILL
		if s.Fault == FaultHangDaemon {
			sig = syscall.SIGSTOP
			f.stopped = append(f.stopped, pid)
		}
		// The jobs with ranks there lose them: surely for kill -9, maybe
		// for a hang (if it outlasts the failure timeout).
		h.jobsOn(ctx, n, func(j *jobRun) {
			j.facts.Failures = append(j.facts.Failures, JobFailure{Code: SigKilled, Sure: sig == syscall.SIGKILL, Step: s.N, What: fmt.Sprintf("%s of %s (pid %d)", s.Fault, n, pid)})
		})
		if signal(pid, sig) {
			f.node = n
			h.injected(string(s.Fault))
			h.note("%s %s (pid %d)", s.Fault, n, pid)
		}
	case FaultHostile:
		h.startHostile(ctx)
	}
	return f
}

func (h *harness) injected(kind string) { h.sum.Faults[kind]++ }

// change injects a process fault or a confirm timeout into rc, a change
// of j just requested (rc is empty when the step has no change: the
// fault then hits j at rest).
func (f *fault) change(ctx context.Context, j *jobRun, rc wire.RC) {
	h, s := f.h, f.s
	if s.Fault == FaultConfirmTimeout {
		f.stopNew(ctx, j, rc)
		return
	}
	kill, _, isProc := procFault(s.Fault)
	if !isProc || j == nil {
		return
	}
	var p Proc
	var ok bool
	switch {
	case s.Target == TargetNew && rc.Type == wire.RCAdd:
		p, ok = h.waitProc(ctx, j, rc, func(p Proc) bool { return rc.Ranks.Contains(p.Rank) })
	case s.Target == TargetLeaving && rc.Type == wire.RCSub:
		p, ok = h.waitProc(ctx, j, rc, func(p Proc) bool { return rc.Ranks.Contains(p.Rank) })
	default:
		if s.Target != TargetOld {
			h.note("%s: the change has no such process", s.Fault)
			return
		}
		p, ok = h.waitProc(ctx, j, wire.RC{}, func(p Proc) bool { return rc.Delta == "" || !rc.Ranks.Contains(p.Rank) })
	}
	if !ok {
		h.note("%s: no such process of %s", s.Fault, j.app)
		return
	}
	kind := string(s.Fault)
	if !kill {
		if signal(p.PID, syscall.SIGSTOP) {
			f.stopped = append(f.stopped, p.PID)
			h.injected(kind)
			h.note("SIGSTOP %s rank %d (pid %d, %s) for %s", j.app, p.Rank, p.PID, s.Target, s.Delay)
		}
		return
	}
	// kill -9: a failure of the job, unless the runtime counts it as
	// the end of the change it belongs to (see ExitFacts).
	sure := s.Target == TargetOld
	j.facts.Failures = append(j.facts.Failures, JobFailure{Code: SigKilled, Sure: sure, Step: s.N, What: fmt.Sprintf("kill -9 of rank %d (%s)", p.Rank, s.Target)})
	if signal(p.PID, syscall.SIGKILL) {
		h.injected(kind)
		h.note("kill -9 %s rank %d (pid %d, %s)", j.app, p.Rank, p.PID, s.Target)
	}
}

// waitProc waits (up to 10 s, or until rc is final) for a running
// process of j that want accepts and picks one with the step's pick.
func (h *harness) waitProc(ctx context.Context, j *jobRun, rc wire.RC, want func(Proc) bool) (Proc, bool) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		jb, err := h.observeJob(ctx, j.ns)
		if err != nil {
			return Proc{}, false
		}
		var c []Proc
		for _, p := range jb.Procs {
			if p.State == wire.ProcStateRunning && p.PID > 0 && want(p) {
				c = append(c, p)
			}
		}
		if len(c) > 0 {
			return c[int(h.curPick%uint32(len(c)))], true
		}
		if rc.Delta == "" || h.final(ctx, rc.Delta) {
			return Proc{}, false
		}
	}
	return Proc{}, false
}

// final reports whether a change is FINALIZED or ABORTED.
func (h *harness) final(ctx context.Context, delta string) bool {
	st := h.rcStatus(ctx, delta)
	return st == wire.RCFinalized || st == wire.RCAborted || st == ""
}

func (h *harness) rcStatus(ctx context.Context, delta string) string {
	var rep wire.RCQueryReply
	if err := h.d.cl.Conn().Call(ctx, wire.KindRCQuery, &wire.RCQueryReq{Delta: delta}, &rep); err != nil || rep.RC == nil {
		return ""
	}
	return rep.RC.Status
}

// stopNew stops every process rc starts as soon as it runs, until rc is
// final: its confirm timeout (1 s) must abort it.
func (f *fault) stopNew(ctx context.Context, j *jobRun, rc wire.RC) {
	h := f.h
	if rc.Type != wire.RCAdd {
		return
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if h.final(ctx, rc.Delta) {
			break
		}
		jb, err := h.observeJob(ctx, j.ns)
		if err != nil {
			break
		}
		for _, p := range jb.Procs {
			if p.State == wire.ProcStateRunning && p.PID > 0 && rc.Ranks.Contains(p.Rank) && !slices.Contains(f.stopped, p.PID) {
				if signal(p.PID, syscall.SIGSTOP) {
					f.stopped = append(f.stopped, p.PID)
				}
			}
		}
	}
	if len(f.stopped) > 0 {
		h.injected(string(FaultConfirmTimeout))
		h.note("stopped %d new processes of %s past its 1s confirm timeout: %s", len(f.stopped), rc.Delta, h.rcStatus(ctx, rc.Delta))
	} else {
		h.note("%s: confirmed before any new process could be stopped", rc.Delta)
	}
}

// end ends the fault: stopped processes get SIGCONT once the step's delay
// has passed; a dvm-stop stops the DVM now, with the step's change in
// flight.
func (f *fault) end() {
	h, s := f.h, f.s
	if len(f.stopped) > 0 {
		if rest := s.Delay - time.Since(f.t0); rest > 0 {
			time.Sleep(rest)
		}
		for _, pid := range f.stopped {
			signal(pid, syscall.SIGCONT)
		}
	}
	if s.Fault == FaultStopDVM && h.d != nil {
		for _, j := range h.jobs {
			if !j.exited() && j.facts.EndedBy == "" {
				j.facts.EndedBy, j.facts.EndStep = EndDVMStop, h.curStep
			}
		}
		err := h.stopDVM(context.Background())
		h.injected(string(FaultStopDVM))
		h.note("dvm stop: %s", errOr(err, "ok"))
	}
}

// pickDaemon chooses a node whose daemon is a process of its own (not
// the master's node 0) and is up.
func (h *harness) pickDaemon(ctx context.Context, pick uint32) (string, int) {
	st, err := h.d.cl.State(ctx)
	if err != nil {
		return "", 0
	}
	var c []wire.NodeInfo
	for _, n := range st.Nodes {
		if n.PID != st.PID && n.PID > 0 && n.State == wire.NodeUp {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return "", 0
	}
	n := c[int(pick%uint32(len(c)))]
	return n.Name, n.PID
}

// jobsOn calls fn for every job of the harness with ranks on node.
func (h *harness) jobsOn(ctx context.Context, node string, fn func(*jobRun)) {
	for _, j := range h.jobs {
		if j.exited() || j.ns == "" {
			continue
		}
		ji, err := h.d.cl.Job(ctx, wire.JobStateReq{Job: j.ns})
		if err != nil {
			continue
		}
		for _, p := range ji.Placement {
			if p.Node == node && p.Ranks.Count() > 0 {
				fn(j)
				break
			}
		}
	}
}

// startHostile opens two connections to the master that misbehave for
// the rest of the step: one says hello and then sends requests without
// ever reading a reply, one sends garbage.
func (h *harness) startHostile(ctx context.Context) {
	sock := h.d.info.Socket
	flood, err := net.Dial("unix", sock)
	if err != nil {
		h.note("hostile client: %v", err)
		return
	}
	garbage, err := net.Dial("unix", sock)
	if err != nil {
		flood.Close()
		h.note("hostile client: %v", err)
		return
	}
	h.hostile = append(h.hostile, flood, garbage)
	h.injected(string(FaultHostile))
	h.note("hostile clients: a flood that never reads, and garbage")
	hello, _ := wire.Marshal(&wire.Hello{Min: wire.ProtoMin, Max: wire.ProtoMax, Role: wire.RoleTool, Name: "chaos-hostile"})
	frame := wire.AppendFrame(nil, wire.AppendEnvelope(nil, &wire.Envelope{V: wire.ProtoMax, ID: 1, Kind: wire.KindHello, Body: hello}))
	body, _ := wire.Marshal(&wire.DVMStateReq{Ended: true})
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		if _, err := flood.Write(frame); err != nil {
			return
		}
		for id := uint64(3); ctx.Err() == nil; id += 2 {
			req := wire.AppendFrame(nil, wire.AppendEnvelope(nil, &wire.Envelope{V: wire.ProtoMax, ID: id, Kind: wire.KindDVMState, Body: body}))
			_ = flood.SetWriteDeadline(time.Now().Add(time.Minute))
			if _, err := flood.Write(req); err != nil {
				return // closed at the end of the step, or by the master
			}
		}
	}()
	go func() {
		defer h.wg.Done()
		junk := make([]byte, 4096)
		for i := range junk {
			junk[i] = byte(i*131 + 7)
		}
		for ctx.Err() == nil {
			if _, err := garbage.Write(junk); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

func (h *harness) closeHostile() {
	for _, c := range h.hostile {
		c.Close()
	}
	h.hostile = nil
}
