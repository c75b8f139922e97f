package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/lib/comm"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// Main runs the benchmark with args (args[0] is the program name) and
// returns the exit status: 0, 1 when the run failed, 2 on a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args[1:], stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "synthetic:", err)
		return 2
	}
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	run := run
	if c.exchange == exchangeKV {
		run = runKV
	}
	if err := run(ctx, c, stdout, stderr, log); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintf(stderr, "synthetic: rank %s: %v\n", os.Getenv("DYNRT_RANK"), err)
		}
		return 1
	}
	return 0
}

// app is one process of the benchmark.
type app struct {
	c   config
	log *slog.Logger
	s   *session.Session
	e   *comm.Endpoint
	cm  *comm.Comm // the communicator of the current set
	// acc is this process's accept request of the change in flight
	// (non-blocking accept of an ADD), accDelta its change.
	acc        *session.AcceptRequest
	accDelta   string
	new        bool         // started by an ADD
	stopMarked bool         // --test-stop-mark done
	set        wire.PsetRef // the set this process works with
	// expected is the work result every iteration must give: the first
	// iteration's, or rank 0's for a process that joined later.
	expected int64

	root   *rootState // rank 0 only
	stdout io.Writer  // for a successor of a lost rank 0
	// The plan's progress as rank 0 last broadcast it: a successor of a
	// lost rank 0 goes on from there.
	planNext, planDue int
	failed            map[string]bool // failure changes handled (failure.go)
	// unrecorded: failure changes accepted whose recovery another loss
	// interrupted; rank 0 reports them with the next one.
	unrecorded []*report.Change
}

// rootState is what rank 0 keeps: the output, the plan of the changes it
// asks for, and the changes so far.
type rootState struct {
	out      io.Writer // the JSON lines
	stdout   io.Writer // the tables
	w        *report.Writer
	iters    int // iterations done
	plan     []change
	next     int // next change of the plan
	nextDue  int // iteration from which the next change may be asked for
	inflight *report.Change
	changes  []*report.Change
	started  time.Time
}

// decision is what rank 0 tells everyone at the start of the change step.
type decision struct {
	Iter   int    `json:"i"`           // rank 0's iteration: every process checks it is at the same one
	Delta  string `json:"d,omitempty"` // the change to accept now ("" for none)
	Type   string `json:"t,omitempty"`
	NewSet string `json:"s,omitempty"` // the set phase 2 built, name@version
	Stop   bool   `json:"x,omitempty"` // leave the loop after this step
	// Ready: rank 0's accept request of Delta (started at an earlier
	// iteration, non-blocking) has completed, so every process waits
	// for its own now and all switch sets at the same iteration.
	Ready bool `json:"r,omitempty"`
	// The plan's progress (app trigger), kept by everyone for a successor
	// should rank 0 be lost.
	Next    int `json:"n,omitempty"`
	NextDue int `json:"nd,omitempty"`
}

// joinMsg is broadcast by rank 0 over every new communicator: where the
// loop goes on, for the processes that just joined it.
type joinMsg struct {
	Iter     int   `json:"i"`
	Expected int64 `json:"e"`
}

// errGone ends a process whose ADD was aborted before it could join.
var errGone = errors.New("the change that started this process was aborted")

// errReported: the error was printed before the job was aborted.
var errReported = errors.New("reported")

func run(ctx context.Context, c config, stdout, stderr io.Writer, log *slog.Logger) (err error) {
	s, err := session.Init(ctx)
	if err != nil {
		return err
	}
	a := &app{c: c, log: log.With("rank", s.Rank()), s: s, stdout: stdout, failed: map[string]bool{}, planDue: c.freq - 1}
	defer func() {
		if a.e != nil {
			a.e.Close()
		}
		if ferr := s.Finalize(context.WithoutCancel(ctx)); err == nil && ferr != nil {
			err = ferr
		}
	}()
	defer func() {
		if err == nil {
			return
		}
		// The job ends with this process's error: under dynrun
		// --on-failure shrink its exit alone would be a loss the others
		// recover from, hiding it. (Printed first: the abort may kill
		// this process before it returns.)
		fmt.Fprintf(stderr, "synthetic: rank %d: %v\n", s.Rank(), err)
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		s.Abort(actx, 1, fmt.Sprintf("synthetic rank %d: %v", s.Rank(), err))
		cancel()
		err = errReported
	}()
	if a.e, err = comm.Open(ctx, s, comm.Options{Logger: log}); err != nil {
		return err
	}
	first, err := a.join(ctx)
	if errors.Is(err, errGone) {
		return nil // the runtime removes it; the job goes on without it
	}
	if err != nil {
		return err
	}
	if a.cm.Rank() == 0 {
		if err := a.becomeRoot(stdout); err != nil {
			return err
		}
		if c.start > 0 && a.cm.Size() != c.start {
			return fmt.Errorf("--start %d, but the job runs %d processes", c.start, a.cm.Size())
		}
	}
	defer func() {
		if a.root != nil {
			a.closeOut()
		}
	}()
	left, err := a.survive(ctx, first)
	if err != nil || left {
		return err
	}
	if a.root != nil {
		return a.finish(ctx)
	}
	return nil
}

// join makes the first communicator. A process started by an ADD confirms
// the change first (listing 6.6), builds the communicator over the set it
// was given and learns from rank 0 the iteration to go on with.
func (a *app) join(ctx context.Context) (int, error) {
	q, err := a.s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
	if err != nil {
		return 0, err
	}
	replace := q.Incl && q.Type == wire.RCReplace && session.FailureDue(q, nil) // in place of lost processes
	if replace || q.Incl && q.Type == wire.RCAdd && (q.Status == wire.RCAnnounced || q.Status == wire.RCPending) {
		if replace {
			a.failed[q.Delta] = true
		}
		set, err := a.s.Confirm(ctx, q.Delta, session.ConfirmOptions{})
		if errors.Is(err, wire.ErrAborted) {
			return 0, errGone
		}
		if err != nil {
			return 0, fmt.Errorf("confirm %s: %w", q.Delta, err)
		}
		a.log.Debug("confirmed", "delta", q.Delta, "set", set)
		a.new = true
		if a.cm, err = a.e.New(ctx, set, a.c.tag); err != nil {
			return 0, err
		}
		a.set = set
		b, err := a.cm.Bcast(ctx, 0, nil)
		if err != nil {
			return 0, fmt.Errorf("join at the loop: %w", err)
		}
		var j joinMsg
		if err := json.Unmarshal(b, &j); err != nil {
			return 0, fmt.Errorf("join message %q: %w", b, err)
		}
		a.expected = j.Expected
		return j.Iter, nil
	}
	p, err := a.s.PsetInfo(ctx, session.AppSet(a.s.App()))
	if err != nil {
		return 0, err
	}
	a.set = wire.PsetRef{Name: p.Name, Version: p.Version}
	a.cm, err = a.e.New(ctx, a.set, a.c.tag)
	return 0, err
}

func (a *app) becomeRoot(stdout io.Writer) error {
	r := &rootState{out: stdout, stdout: stdout, started: time.Now(), next: a.planNext, nextDue: a.planDue}
	if a.c.out != "" && a.c.out != "-" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if len(a.failed) > 0 {
			// The successor of a lost rank 0 goes on with its file.
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		}
		f, err := os.OpenFile(a.c.out, flags, 0o644)
		if err != nil {
			return err
		}
		r.out = f
	}
	r.w = report.NewWriter(r.out)
	if a.c.trigger == triggerApp {
		r.plan = plan(a.c.mode, a.c.start, a.c.limit, a.c.delta)
	}
	a.root = r
	return nil
}

func (a *app) closeOut() {
	if f, ok := a.root.out.(*os.File); ok && f != os.Stdout {
		f.Close()
	}
}

// loop is the main loop of listing 6.7 from iteration *it (which it
// advances). left reports that a SUB removed this process.
func (a *app) loop(ctx context.Context, it *int) (left bool, err error) {
	for ; ; *it++ {
		it := *it
		line := report.Iter{Kind: report.KindIter, Iter: it, Procs: a.cm.Size()}

		t := time.Now()
		lo, hi := partition(a.c.problem, a.cm.Rank(), a.cm.Size())
		line.RebalanceMS = report.MS(time.Since(t))

		// On this machine many processes share two cores, so the root's
		// own share of the work says little: the work step is timed from
		// the barrier until the sum of the results is in, which is when
		// the slowest process has finished.
		t = time.Now()
		if err := a.cm.Barrier(ctx); err != nil {
			return false, fmt.Errorf("iteration %d: barrier: %w", it, err)
		}
		line.SyncMS = report.MS(time.Since(t))

		t = time.Now()
		n := work(a.c.problem, lo, hi)
		if a.new {
			n += a.c.skew
		}
		line.OwnWorkMS = report.MS(time.Since(t))
		sum, err := comm.Allreduce(ctx, a.cm, comm.Sum, []int64{n})
		if err != nil {
			return false, fmt.Errorf("iteration %d: allreduce: %w", it, err)
		}
		line.WorkMS = report.MS(time.Since(t))
		line.Count = sum[0]
		if a.expected == 0 {
			a.expected = sum[0]
		}
		if sum[0] != a.expected {
			return false, fmt.Errorf("iteration %d with %d processes: the work result is %d, the first iteration's was %d",
				it, a.cm.Size(), sum[0], a.expected)
		}

		t = time.Now()
		stop, left, err := a.rcStep(ctx, it, &line)
		if err != nil || left {
			return left, err
		}
		line.RCMS = report.MS(time.Since(t))
		if r := a.root; r != nil {
			if c := r.inflight; c != nil || line.Delta != "" {
				a.account(&line)
			}
			if it >= r.iters { // an iteration done again after a loss is reported once
				r.w.Line(line)
				r.iters = it + 1
			}
			if err := r.w.Err(); err != nil {
				return false, err
			}
		}
		if stop {
			return false, nil
		}
	}
}

// account adds the iteration's share to the change it handled.
func (a *app) account(line *report.Iter) {
	r := a.root
	c := r.inflight
	if c == nil {
		return
	}
	// Sums of values rounded to microseconds, rounded again.
	c.Phase3MS = math.Round((c.Phase3MS+line.Phase3MS)*1e3) / 1e3
	c.OverheadMS = math.Round((c.OverheadMS+line.RCMS)*1e3) / 1e3
	if line.Pending() {
		c.PendingIters++
	}
	if line.RCStatus != wire.RCPending && line.RCStatus != wire.RCAnnounced {
		c.Status, c.LastIter = line.RCStatus, line.Iter
		c.To = a.cm.Size()
		if c.Status == wire.RCAborted {
			c.To = c.From
		}
		r.changes = append(r.changes, c)
		r.inflight = nil
	}
}

// rcStep is the resource-change step of listing 6.7: rank 0 looks for a
// change (asking for one first with --trigger app) and runs phase 2; then
// everyone accepts over the communicator (phase 3) and, once the change is
// done, builds the communicator over the new set.
func (a *app) rcStep(ctx context.Context, it int, line *report.Iter) (stop, left bool, err error) {
	var d decision
	var msg []byte
	if a.root != nil {
		if d, err = a.decide(ctx, it, line); err != nil {
			return false, false, err
		}
		d.Iter, d.Next, d.NextDue = it, a.root.next, a.root.nextDue
		msg, _ = json.Marshal(d)
	}
	if msg, err = a.cm.Bcast(ctx, 0, msg); err != nil {
		return false, false, fmt.Errorf("iteration %d: broadcast of the change: %w", it, err)
	}
	d = decision{}
	if err := json.Unmarshal(msg, &d); err != nil {
		return false, false, fmt.Errorf("iteration %d: change message %q: %w", it, msg, err)
	}
	if d.Iter != it {
		return false, false, fmt.Errorf("this process is at iteration %d, rank 0 at %d", it, d.Iter)
	}
	a.planNext, a.planDue = d.Next, d.NextDue
	if d.Delta == "" {
		if d.Stop {
			if err := a.endTogether(ctx, it); err != nil {
				return false, false, err
			}
		}
		return d.Stop, false, nil
	}
	t := time.Now()
	acc, pending, err := a.accept(ctx, d)
	line.Phase3MS = report.MS(time.Since(t))
	line.Delta, line.RCType = d.Delta, d.Type
	if r := a.root; r != nil && r.inflight != nil {
		line.RCN = r.inflight.N
	}
	switch {
	case errors.Is(err, wire.ErrAborted):
		a.log.Warn("change aborted", "delta", d.Delta, "err", err)
		line.RCStatus = wire.RCAborted
		return false, false, nil
	case err != nil:
		return false, false, fmt.Errorf("iteration %d: accept %s: %w", it, d.Delta, err)
	}
	switch {
	case acc.Terminate:
		a.log.Debug("removed", "delta", d.Delta)
		return false, true, nil
	case pending:
		line.RCStatus = wire.RCPending
		return false, false, nil
	}
	// Done for this set (a SUB may still wait for other bound sets: not
	// this program's concern).
	line.RCStatus = wire.RCFinalized
	ref := acc.NewSet
	if ref.Name == "" {
		if ref, err = parseRef(d.NewSet); err != nil {
			return false, false, fmt.Errorf("iteration %d: change %s: no new set: %w", it, d.Delta, err)
		}
	}
	t = time.Now()
	cm, err := a.e.New(ctx, ref, a.c.tag)
	if err != nil {
		return false, false, fmt.Errorf("iteration %d: communicator over %s@%d: %w", it, ref.Name, ref.Version, err)
	}
	line.CommMS = report.MS(time.Since(t))
	var j []byte
	if a.root != nil {
		j, _ = json.Marshal(joinMsg{Iter: it + 1, Expected: a.expected})
	}
	if _, err := cm.Bcast(ctx, 0, j); err != nil {
		return false, false, fmt.Errorf("iteration %d: broadcast to the new processes: %w", it, err)
	}
	if err := a.cm.Free(ctx); err != nil {
		a.log.Warn("free the old communicator", "err", err)
	}
	a.cm, a.set = cm, ref
	if r := a.root; r != nil && r.inflight != nil {
		r.inflight.CommMS = line.CommMS
	}
	return false, false, nil
}

// endTogether is the barrier after rank 0's decision to stop. Without it
// rank 0, whose broadcast returns once sent, could end while a process
// lost meanwhile keeps the others from the decision and sends them into a
// recovery that needs rank 0. A loss before the barrier completes is
// recovered from like any other, and the loop stops again after it.
func (a *app) endTogether(ctx context.Context, it int) error {
	if dir := a.c.stopMark; dir != "" && !a.stopMarked {
		a.stopMarked = true
		if err := testStopMark(ctx, dir, a.s.Rank()); err != nil {
			return err
		}
	}
	if err := a.cm.Barrier(ctx); err != nil {
		return fmt.Errorf("iteration %d: barrier before the end: %w", it, err)
	}
	return nil
}

// testStopMark is the test hook of --test-stop-mark: the process creates
// dir/<rank> and waits for dir/go.
func testStopMark(ctx context.Context, dir string, rank uint32) error {
	if err := os.WriteFile(filepath.Join(dir, strconv.FormatUint(uint64(rank), 10)), nil, 0o600); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// decide is rank 0's part of the change step: phase 1 (ask for the next
// change of the plan when it is due, then query) and phase 2 (the set
// operation building the new set).
func (a *app) decide(ctx context.Context, it int, line *report.Iter) (decision, error) {
	r := a.root
	t := time.Now()
	last := it+1 >= a.c.iters
	if a.c.trigger == triggerApp && r.inflight == nil && r.next < len(r.plan) && it >= r.nextDue {
		ch := r.plan[r.next]
		r.next++
		r.nextDue = it + a.c.freq
		// Queue: a SUB is FINALIZED before its processes have exited, and
		// the runtime takes the next change only once they have; the
		// wait counts in this iteration's phase 1.
		o := session.RequestOptions{ConfirmTimeout: a.c.confirm, Queue: true}
		if _, err := a.s.RequestRC(ctx, ch.Type, ch.N, o); err != nil {
			return decision{}, fmt.Errorf("iteration %d: request %s %d: %w", it, ch.Type, ch.N, err)
		}
	}
	q, err := a.s.QueryRC(ctx, session.QueryOptions{Bound: a.set.Name})
	if err != nil {
		return decision{}, err
	}
	if session.FailureDue(q, a.handled) {
		// Handled by every survivor outside the loop (survive).
		return decision{}, &session.LostError{RC: q}
	}
	line.QueryMS = report.MS(time.Since(t))
	if c := r.inflight; c != nil {
		// Accepted before (non-blocking) and still in flight: once rank
		// 0's request has completed, everyone completes its own now.
		ready := a.acc == nil
		if !ready {
			_, ready, _ = a.acc.Test()
		}
		return decision{Delta: c.Delta, Type: c.Type, Ready: ready}, nil
	}
	if !q.Null() { // QueryRC reports a change only while it needs this process
		switch q.Status {
		case wire.RCAborted:
			// Given up before this job took part: count it, nothing to do.
			c := &report.Change{Kind: report.KindChange, Delta: q.Delta, Type: q.Type, Status: wire.RCAborted,
				N: int(q.Record.N), From: a.cm.Size(), To: a.cm.Size(), FirstIter: it, LastIter: it, Mode: a.c.mode, Blocking: a.c.blocking}
			r.changes = append(r.changes, c)
		case wire.RCAnnounced:
			return a.phase2(ctx, it, q, line)
		}
	}
	// The run ends after -i iterations, or later: once every change of
	// the plan (app trigger) or --changes changes (external) have ended.
	// A queued request answers at once: every change asked for must
	// have ended (FINALIZED or ABORTED) too.
	stop := last && r.next == len(r.plan) && len(r.changes) >= max(a.c.changes, r.next)
	return decision{Stop: stop}, nil
}

// accept is this process's phase 3 of the change d over the current
// communicator (thesis listing 6.5): the first call starts the accept
// request (rank 0 names the new set). A blocking run (-b), a SUB and a
// REPLACE wait for it at once; a non-blocking ADD goes on (pending) until
// rank 0 finds its own request complete (d.Ready), so that every process
// switches sets at the same iteration.
func (a *app) accept(ctx context.Context, d decision) (acc session.AcceptResult, pending bool, err error) {
	if a.acc == nil || a.accDelta != d.Delta {
		o := session.AcceptOptions{Over: a.cm}
		if a.cm.Rank() == 0 && d.NewSet != "" {
			if o.NewSet, err = session.ParseSetVersion(d.NewSet); err != nil {
				return acc, false, err
			}
		}
		a.acc, a.accDelta = a.s.Accept(ctx, d.Delta, o), d.Delta
	}
	if !a.c.blocking && d.Type == wire.RCAdd && !d.Ready {
		return acc, true, nil
	}
	acc, err = a.acc.Wait(ctx)
	a.acc, a.accDelta = nil, ""
	return acc, false, err
}

// phase2 starts the change q: the root builds the new set (UNION with the
// delta for an ADD, DIFFERENCE for a SUB) as a new version of its set.
func (a *app) phase2(ctx context.Context, it int, q session.RC, line *report.Iter) (decision, error) {
	r := a.root
	bound := false
	for _, b := range q.Record.BoundRefs {
		bound = bound || b == a.set
	}
	if !bound {
		return decision{}, fmt.Errorf("iteration %d: change %s is bound to %v, this job works with %s@%d",
			it, q.Delta, q.Record.BoundRefs, a.set.Name, a.set.Version)
	}
	c := &report.Change{Kind: report.KindChange, Delta: q.Delta, Type: q.Type, N: int(q.Record.N),
		From: a.cm.Size(), Blocking: a.c.blocking, Mode: a.c.mode, FirstIter: it, QueryMS: line.QueryMS}
	r.inflight = c
	line.Phase1MS = report.Since(q.Record.Times.Requested, q.Record.Times.Announced)
	op := session.OpUnion
	if q.Type == wire.RCSub {
		op = session.OpDifference
	}
	t := time.Now()
	res, err := a.s.PsetOp(ctx, op, a.set.Name, q.Delta, session.PsetOpOptions{Target: a.set.Name})
	line.Phase2MS = report.MS(time.Since(t))
	c.Phase2MS = line.Phase2MS
	d := decision{Delta: q.Delta, Type: q.Type}
	switch {
	case err == nil:
		d.NewSet = res.Ref().String()
	case errors.Is(err, wire.ErrAborted):
		// Aborted meanwhile: the accept tells everyone.
	default:
		return decision{}, fmt.Errorf("iteration %d: %s(%s, %s): %w", it, op, a.set.Name, q.Delta, err)
	}
	return d, nil
}

func parseRef(s string) (wire.PsetRef, error) {
	n, v, err := pset.ParseRef(s)
	if err != nil {
		return wire.PsetRef{}, err
	}
	if v < 0 {
		return wire.PsetRef{}, fmt.Errorf("set %q without a version", s)
	}
	return wire.PsetRef{Name: n.String(), Version: uint32(v)}, nil
}

// finish writes what rank 0 knows once the loop is over: one line per
// change with the runtime's step times, the end line and the tables.
func (a *app) finish(ctx context.Context) error {
	r := a.root
	out := make([]report.Change, 0, len(r.changes))
	for _, c := range r.changes {
		// A SUB's processes may still be exiting: wait a little for the
		// record to be settled, so that the total counts the exits.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		q, err := a.s.WaitRC(wctx, session.QueryOptions{Delta: c.Delta}, func(q session.RC) bool {
			return q.Record.Settled || q.Status == wire.RCAborted
		})
		cancel()
		if err != nil && q.Record.Delta == "" {
			return fmt.Errorf("record of %s: %w", c.Delta, err)
		}
		report.ChangeTimes(c, q.Record)
		out = append(out, *c)
		r.w.Line(c)
	}
	r.w.Line(report.End{
		Kind: report.KindEnd, Mode: a.c.mode, Trigger: a.c.trigger, Start: a.c.start, Limit: a.c.limit, Delta: a.c.delta,
		Freq: a.c.freq, Blocking: a.c.blocking, Problem: a.c.problem, Count: a.expected, FinalProcs: a.cm.Size(),
		WallMS: report.MS(time.Since(r.started)), Changes: len(r.changes), Iters: r.iters,
	})
	if err := r.w.Err(); err != nil {
		return err
	}
	if !a.c.tables {
		return nil
	}
	tw := r.stdout
	fmt.Fprintf(tw, "# work result: %d of %d sampling points inside the box in every iteration\n", a.expected, a.c.problem)
	return report.Tables(tw, out, "# ")
}
