package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// Lost processes (dynrun --on-failure shrink, docs/synthetic.md
// "Failures"). The runtime turns a loss into a SUB of the lost ranks; the
// survivors accept it over a communicator of their own and do the
// iteration that was under way again over the smaller set, so the work
// units the lost processes held are done by the others and every
// iteration's result stays the same.

// failureWait bounds the wait for the failure change after a
// communication error that may come from a lost peer.
const failureWait = 2 * time.Minute

// survive runs the loop from iteration it, recovering from every loss.
func (a *app) survive(ctx context.Context, it int) (left bool, err error) {
	for {
		wctx, stop := a.s.WatchFailure(ctx, a.set.Name, a.handled)
		left, err = a.loop(wctx, &it)
		stop()
		if err == nil || left {
			return left, err
		}
		f, err := a.s.FailureBehind(ctx, wctx, err, a.set.Name, a.handled, failureWait)
		for err == nil {
			// Under a watch too: another loss during the recovery
			// brings the change that follows it.
			a.failed[f.Delta] = true
			rctx, stop := a.s.WatchFailure(ctx, a.set.Name, a.handled)
			resume, rerr := a.recover(rctx, f, it)
			stop()
			if rerr == nil {
				it = resume
				break
			}
			f, err = a.s.FailureBehind(ctx, rctx, rerr, a.set.Name, a.handled, failureWait)
		}
		if err != nil {
			return false, err
		}
	}
}

func (a *app) handled(delta string) bool { return a.failed[delta] }

// resumeMsg is what the survivors tell each other after a loss.
type resumeMsg struct {
	Iter     int   `json:"i"` // the iteration it was in
	Root     bool  `json:"r"` // it was rank 0
	Next     int   `json:"n"` // the plan's progress
	NextDue  int   `json:"nd"`
	Expected int64 `json:"e"`
}

// recover handles the failure change f as a survivor that was in
// iteration it: phases 2 and 3 over the survivors, then the iteration to
// go on with (the earliest any survivor was in: its work is done again).
// The caller has marked f handled before it started the watch of ctx
// (whose goroutine reads the mark).
func (a *app) recover(ctx context.Context, f session.RC, it int) (int, error) {
	if f.Type != wire.RCSub && f.Type != wire.RCReplace {
		return 0, wire.Errorf(wire.ErrUnsupported, "failure change %s is a %s: synthetic recovers from failure SUBs and REPLACEs", f.Delta, f.Type)
	}
	var ref wire.PsetRef
	for _, b := range f.Record.BoundRefs {
		if b.Name == a.set.Name {
			ref = b
		}
	}
	if ref.Name == "" {
		return 0, wire.Errorf(wire.ErrState, "failure change %s is bound to %v, this process works with %s", f.Delta, f.Record.BoundRefs, a.set.Name)
	}
	a.log.Debug("processes lost", "ranks", f.Lost(), "delta", f.Delta, "iteration", it)
	from := a.cm.Size()
	if n := len(a.unrecorded); n > 0 {
		from = a.unrecorded[n-1].To // after the change whose recovery was interrupted
	}
	t := time.Now()
	// The bound set's version holds the survivors only.
	cm, err := a.e.New(ctx, ref, a.c.tag)
	if err != nil {
		return 0, fmt.Errorf("after the loss of %s: communicator over %s@%d: %w", f.Lost(), ref.Name, ref.Version, err)
	}
	commMS := report.MS(time.Since(t))
	var newSet session.SetVersion
	var phase2 float64
	if cm.Rank() == 0 {
		t := time.Now()
		if newSet, err = a.s.SetAfter(ctx, a.set.Name, f); err != nil {
			return 0, fmt.Errorf("after the loss of %s: phase 2: %w", f.Lost(), err)
		}
		phase2 = report.MS(time.Since(t))
	}
	// A REPLACE's accept waits for the new processes, which join below.
	t = time.Now()
	acc, err := a.s.Accept(ctx, f.Delta, session.AcceptOptions{Bound: a.set.Name, NewSet: newSet, Over: cm}).Wait(ctx)
	if err != nil {
		return 0, fmt.Errorf("after the loss of %s: accept %s: %w", f.Lost(), f.Delta, err)
	}
	phase3 := report.MS(time.Since(t))
	// Accepted: the change is done even if another loss interrupts what
	// follows; rank 0 reports it then with the next one.
	fc := &report.Change{
		Kind: report.KindChange, Delta: f.Delta, Type: f.Type, Status: wire.RCFinalized, N: int(f.Record.N),
		From: from, To: cm.Size(), Blocking: a.c.blocking, Mode: a.c.mode, FirstIter: it, LastIter: it,
		Phase2MS: phase2, Phase3MS: phase3, CommMS: commMS,
	}
	recorded := false
	defer func() {
		if !recorded {
			a.unrecorded = append(a.unrecorded, fc)
		}
	}()
	set := acc.NewSet
	if set.Name == "" {
		v, err := cm.Bcast(ctx, 0, []byte(newSet.String()))
		if err == nil {
			set, err = parseRef(string(v))
		}
		if err != nil {
			return 0, fmt.Errorf("after the loss of %s: the new set: %w", f.Lost(), err)
		}
	}
	me := resumeMsg{Iter: it, Root: a.root != nil, Next: a.planNext, NextDue: a.planDue, Expected: a.expected}
	if r := a.root; r != nil {
		me.Next, me.NextDue = r.next, r.nextDue
	}
	b, _ := json.Marshal(me)
	all, err := cm.Allgather(ctx, b)
	if err != nil {
		return 0, fmt.Errorf("after the loss of %s: %w", f.Lost(), err)
	}
	resume, plan := it, me
	for i, m := range all {
		var x resumeMsg
		if err := json.Unmarshal(m, &x); err != nil {
			return 0, wire.Errorf(wire.ErrMalformed, "after the loss of %s: member %d: %w", f.Lost(), i, err)
		}
		resume = min(resume, x.Iter)
		if x.Root || (i == 0 && !plan.Root) {
			plan = x
		}
		if a.expected == 0 {
			a.expected = x.Expected
		}
	}
	a.planNext, a.planDue = plan.Next, plan.NextDue
	if f.Type == wire.RCReplace {
		// With the new processes: they learn where the loop goes on as
		// after an ADD (join).
		t := time.Now()
		with, err := a.e.New(ctx, set, a.c.tag)
		if err != nil {
			return 0, fmt.Errorf("after the loss of %s: communicator over %s@%d: %w", f.Lost(), set.Name, set.Version, err)
		}
		commMS += report.MS(time.Since(t))
		var j []byte
		if with.Rank() == 0 {
			j, _ = json.Marshal(joinMsg{Iter: resume, Expected: a.expected})
		}
		if _, err := with.Bcast(ctx, 0, j); err != nil {
			return 0, fmt.Errorf("after the loss of %s: broadcast to the new processes: %w", f.Lost(), err)
		}
		_ = cm.Free(ctx)
		cm = with
	}
	if err := a.cm.Free(ctx); err != nil {
		a.log.Debug("free the communicator with the lost processes", "err", err)
	}
	a.cm, a.set = cm, set
	a.acc, a.accDelta = nil, "" // a change in flight when a member died is aborted
	if cm.Rank() == 0 && a.root == nil {
		// Rank 0 was lost: this process reports from now on.
		if err := a.becomeRoot(a.stdout); err != nil {
			return 0, err
		}
		a.root.iters = resume
	}
	if r := a.root; r != nil {
		if c := r.inflight; c != nil {
			// A change in flight when a member of its bound set died is
			// aborted by the runtime.
			c.Status, c.LastIter, c.To = wire.RCAborted, resume, c.From
			r.changes = append(r.changes, c)
			r.inflight = nil
		}
		if f.Type == wire.RCReplace {
			fc.To = cm.Size()
		}
		fc.FirstIter, fc.LastIter, fc.CommMS = resume, resume, commMS
		r.changes = append(append(r.changes, a.unrecorded...), fc)
	}
	recorded, a.unrecorded = true, nil
	return resume, nil
}
