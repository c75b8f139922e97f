package main

// --exchange kv: the loop with examples/c-synthetic's protocol, so that
// one job can hold ranks of both programs (docs/synthetic.md, "Mixed
// jobs"). Every step that talks to other ranks goes through the runtime's
// key-value store and fences, exactly as src/synthetic.c does it: the keys
// (c:<iter>, d:<iter>, j:<delta>), the values (decimal text), the fence
// ids (<step>:<name@version>:<iter>), their order and who does what. Keep
// the two in step: a change to one is a change to the other.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// kvApp is one process of the benchmark in kv mode.
type kvApp struct {
	c        config
	log      *slog.Logger
	s        *session.Session
	me       uint32
	set      session.SetVersion
	members  []uint32
	expected int64
	iter     int
	// The change in flight, as the root decided it.
	delta, typ string
	newSet     string
	// The root's record (c-synthetic keeps the same).
	w                                 *report.Writer
	changes                           []*report.Change
	nextDue, ended, refused, requests int
	asked                             bool
	started                           time.Time
}

// kvDecision is the value of d:<iter>: "<iter> <stop> <type> <delta>
// <newset>", "-" for none.
type kvDecision struct {
	iter               int
	stop               bool
	typ, delta, newSet string
}

func (d kvDecision) String() string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	stop := 0
	if d.stop {
		stop = 1
	}
	return fmt.Sprintf("%d %d %s %s %s", d.iter, stop, dash(d.typ), dash(d.delta), dash(d.newSet))
}

func parseKVDecision(s string) (kvDecision, error) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return kvDecision{}, fmt.Errorf("decision %q: want 5 fields", s)
	}
	it, err := strconv.Atoi(f[0])
	if err != nil || (f[1] != "0" && f[1] != "1") {
		return kvDecision{}, fmt.Errorf("decision %q: bad iteration or stop flag", s)
	}
	undash := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	return kvDecision{iter: it, stop: f[1] == "1", typ: undash(f[2]), delta: undash(f[3]), newSet: undash(f[4])}, nil
}

// runKV is run for --exchange kv.
func runKV(ctx context.Context, c config, stdout, stderr io.Writer, log *slog.Logger) (err error) {
	s, err := session.Init(ctx)
	if err != nil {
		return err
	}
	a := &kvApp{c: c, log: log.With("rank", s.Rank()), s: s, me: s.Rank(), started: time.Now(), w: report.NewWriter(stdout)}
	defer func() {
		if err != nil {
			// As c-synthetic: the job ends with this error, no rank hangs.
			fmt.Fprintf(stderr, "synthetic: rank %d: %v\n", a.me, err)
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.Abort(actx, 1, fmt.Sprintf("synthetic rank %d: %v", a.me, err))
			cancel()
			err = errReported
		}
		if ferr := s.Finalize(context.WithoutCancel(ctx)); err == nil && ferr != nil {
			err = ferr
		}
	}()
	if s.Info().Delta != "" {
		if gone, err := a.join(ctx); gone || err != nil {
			return err
		}
	} else {
		p, err := s.PsetInfo(ctx, session.AppSet(s.App()))
		if err != nil {
			return err
		}
		if err := a.load(ctx, session.SetVersion{Name: p.Name, Version: p.Version}); err != nil {
			return err
		}
		a.c.skew = 0 // only the new processes lie, so the check must catch them
		if c.start > 0 && len(a.members) != c.start {
			return fmt.Errorf("--start %d, but the job runs %d processes", c.start, len(a.members))
		}
		a.nextDue = c.freq - 1
	}
	if a.c.limit == 0 {
		a.c.limit = len(a.members)
	}
	for {
		more, left, err := a.iterate(ctx)
		if err != nil || left {
			return err
		}
		if !more {
			break
		}
	}
	if a.me == a.members[0] {
		return a.reportEnd(ctx)
	}
	return nil
}

func (a *kvApp) load(ctx context.Context, ref session.SetVersion) error {
	p, err := a.s.PsetInfo(ctx, ref.String())
	if err != nil {
		return fmt.Errorf("set %s: %w", ref, err)
	}
	a.set, a.members = ref, p.Members.Ranks()
	return nil
}

func (a *kvApp) index() (int, error) {
	for i, r := range a.members {
		if r == a.me {
			return i, nil
		}
	}
	return 0, fmt.Errorf("rank %d is not a member of %s", a.me, a.set)
}

func (a *kvApp) fence(ctx context.Context, what string, collect bool) error {
	id := fmt.Sprintf("%s:%s:%d", what, a.set, a.iter)
	return a.s.FenceWith(ctx, session.FenceOptions{
		ID: id, Collect: collect, Procs: []wire.ProcRanges{{Ranks: wire.RangesOf(a.members)}},
	})
}

func (a *kvApp) put(ctx context.Context, key, v string) error {
	if err := a.s.Put(key, []byte(v)); err != nil {
		return err
	}
	return a.s.Commit(ctx)
}

// join: a process started by an ADD or REPLACE confirms, then reads where
// the loop goes on from the root's j:<delta>. gone: the change was aborted.
func (a *kvApp) join(ctx context.Context) (gone bool, err error) {
	q, err := a.s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
	if err != nil {
		return false, err
	}
	if q.Null() || !q.Incl {
		return false, fmt.Errorf("started by %s, which does not need this process", a.s.Info().Delta)
	}
	set, err := a.s.Confirm(ctx, q.Delta, session.ConfirmOptions{})
	if errors.Is(err, wire.ErrAborted) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("confirm %s: %w", q.Delta, err)
	}
	if err := a.load(ctx, set); err != nil {
		return false, err
	}
	jctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := a.s.Get(jctx, a.members[0], "j:"+q.Delta, session.Wait())
	if err != nil {
		return false, fmt.Errorf("join message of %s: %w", q.Delta, err)
	}
	if _, err := fmt.Sscanf(string(v), "%d %d", &a.iter, &a.expected); err != nil {
		return false, fmt.Errorf("join message %q: %w", v, err)
	}
	return false, nil
}

// iterate is one iteration; more is false when the run ends after it,
// left when a change removed this process.
func (a *kvApp) iterate(ctx context.Context) (more, left bool, err error) {
	line := report.Iter{Kind: report.KindIter, Iter: a.iter, Procs: len(a.members)}
	t := time.Now()
	k, err := a.index()
	if err != nil {
		return false, false, err
	}
	lo, hi := partition(a.c.problem, k, len(a.members))
	line.RebalanceMS = report.MS(time.Since(t))
	t = time.Now()
	if err := a.fence(ctx, "sync", false); err != nil {
		return false, false, fmt.Errorf("iteration %d: sync: %w", a.iter, err)
	}
	line.SyncMS = report.MS(time.Since(t))
	tw := time.Now()
	n := work(a.c.problem, lo, hi) + a.c.skew
	line.OwnWorkMS = report.MS(time.Since(tw))
	key := fmt.Sprintf("c:%d", a.iter)
	if err := a.put(ctx, key, strconv.FormatInt(n, 10)); err != nil {
		return false, false, err
	}
	if err := a.fence(ctx, "sum", true); err != nil {
		return false, false, fmt.Errorf("iteration %d: sum: %w", a.iter, err)
	}
	var sum int64
	for _, r := range a.members {
		v, err := a.s.Get(ctx, r, key)
		if err != nil {
			return false, false, fmt.Errorf("iteration %d: count of rank %d: %w", a.iter, r, err)
		}
		c, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return false, false, fmt.Errorf("iteration %d: count of rank %d %q: %w", a.iter, r, v, err)
		}
		sum += c
	}
	line.WorkMS, line.Count = report.MS(time.Since(tw)), sum
	if a.expected == 0 {
		a.expected = sum
	} else if sum != a.expected {
		return false, false, fmt.Errorf("iteration %d with %d processes: work result %d, want %d", a.iter, len(a.members), sum, a.expected)
	}

	tr := time.Now()
	root := a.me == a.members[0]
	rootRank := a.members[0]
	dkey := fmt.Sprintf("d:%d", a.iter)
	var d kvDecision
	if root {
		if d, err = a.decide(ctx, &line); err != nil {
			return false, false, err
		}
		if err := a.put(ctx, dkey, d.String()); err != nil {
			return false, false, err
		}
	}
	if err := a.fence(ctx, "decision", true); err != nil {
		return false, false, fmt.Errorf("iteration %d: decision: %w", a.iter, err)
	}
	if !root {
		v, err := a.s.Get(ctx, rootRank, dkey)
		if err != nil {
			return false, false, fmt.Errorf("iteration %d: decision of rank %d: %w", a.iter, rootRank, err)
		}
		if d, err = parseKVDecision(string(v)); err != nil {
			return false, false, err
		}
	}
	if d.iter != a.iter {
		return false, false, fmt.Errorf("at iteration %d, the root at %d", a.iter, d.iter)
	}
	status := ""
	if d.delta != "" {
		a.delta, a.typ, a.newSet = d.delta, d.typ, d.newSet
		line.Delta, line.RCType = d.delta, d.typ
		if status, left, err = a.accept(ctx, &line); err != nil || left {
			return false, left, err
		}
		line.RCStatus = status
	}
	line.RCMS = report.MS(time.Since(tr))
	if root {
		a.account(&line, status)
		a.w.Line(line)
		if err := a.w.Err(); err != nil {
			return false, false, err
		}
	}
	a.iter++
	return !d.stop, false, nil
}

// decide is the root's phase 1 and 2.
func (a *kvApp) decide(ctx context.Context, line *report.Iter) (kvDecision, error) {
	t := time.Now()
	app := a.c.trigger == triggerApp
	size := len(a.members)
	// A request queued behind a change still settling is answered at once
	// (NULL): it is found by the query once announced, not asked again.
	if a.delta == "" && app && !a.asked && a.iter >= a.nextDue && size != a.c.limit && a.c.delta > 0 {
		typ, n := wire.RCAdd, a.c.limit-size
		if n < 0 {
			typ, n = wire.RCSub, -n
		}
		n = min(n, a.c.delta)
		_, err := a.s.RequestRC(ctx, typ, n, session.RequestOptions{Queue: true, ConfirmTimeout: a.c.confirm})
		switch {
		case errors.Is(err, wire.ErrState) && a.refused < 100: // the job is still being launched
			a.refused++
			a.nextDue = a.iter + 1
		case err != nil:
			return kvDecision{}, fmt.Errorf("request a %s of %d: %w", typ, n, err)
		default:
			a.asked = true
			a.requests++
		}
	}
	var q session.RC
	if a.delta == "" {
		var err error
		if q, err = a.s.QueryRC(ctx, session.QueryOptions{}); err != nil {
			return kvDecision{}, err
		}
	}
	line.QueryMS = report.MS(time.Since(t))
	if !q.Null() && q.Status == wire.RCAnnounced {
		t = time.Now()
		name := a.set.Name
		var res session.PsetOpResult
		var err error
		switch q.Type {
		case wire.RCAdd:
			res, err = a.s.PsetOp(ctx, session.OpUnion, name, q.Delta, session.PsetOpOptions{Target: name})
		case wire.RCSub:
			res, err = a.s.PsetOp(ctx, session.OpDifference, name, q.Delta, session.PsetOpOptions{Target: name})
		default:
			if res, err = a.s.PsetOp(ctx, session.OpUnion, name, q.Delta, session.PsetOpOptions{Target: name}); err == nil {
				res, err = a.s.PsetOp(ctx, session.OpDifference, name, q.Record.OutSet, session.PsetOpOptions{Target: name})
			}
		}
		if err != nil {
			return kvDecision{}, fmt.Errorf("iteration %d: phase 2 of %s: %w", a.iter, q.Delta, err)
		}
		line.Phase2MS = report.MS(time.Since(t))
		line.Phase1MS = report.Since(q.Record.Times.Requested, q.Record.Times.Announced)
		a.delta, a.typ, a.newSet, a.asked = q.Delta, q.Type, res.Ref().String(), false
		a.changes = append(a.changes, &report.Change{Kind: report.KindChange, Delta: q.Delta, Type: q.Type,
			N: int(q.Record.N), From: size, FirstIter: a.iter, QueryMS: line.QueryMS, Phase2MS: line.Phase2MS,
			Blocking: a.c.blocking, Mode: modeInc})
	}
	d := kvDecision{iter: a.iter, typ: a.typ, delta: a.delta, newSet: a.newSet}
	if a.delta == "" {
		d.typ, d.newSet = "", ""
		d.stop = a.iter+1 >= a.c.iters && (app && (size == a.c.limit || a.c.delta == 0) || !app && a.ended >= a.c.changes)
	}
	return d, nil
}

// accept is phase 3 of the change in flight: every member's own request
// (the member form), blocking with -b; returns the status after it.
func (a *kvApp) accept(ctx context.Context, line *report.Iter) (status string, left bool, err error) {
	o := session.AcceptOptions{NoBlock: !a.c.blocking}
	root := a.me == a.members[0]
	if root {
		if o.NewSet, err = session.ParseSetVersion(a.newSet); err != nil {
			return "", false, err
		}
	}
	t := time.Now()
	res, err := a.s.Accept(ctx, a.delta, o).Wait(ctx)
	line.Phase3MS = report.MS(time.Since(t))
	if err != nil {
		return "", false, fmt.Errorf("iteration %d: accept %s: %w", a.iter, a.delta, err)
	}
	if res.Terminate {
		return res.Status, true, nil
	}
	// A SUB is complete for this set once accepted; an ADD or REPLACE once
	// FINALIZED.
	if res.Status != wire.RCFinalized && a.typ != wire.RCSub {
		return res.Status, false, nil
	}
	t = time.Now()
	ref, err := session.ParseSetVersion(a.newSet)
	if err != nil {
		return "", false, err
	}
	if err := a.load(ctx, ref); err != nil {
		return "", false, err
	}
	line.CommMS = report.MS(time.Since(t))
	if root && a.typ != wire.RCSub {
		// Where the new processes join: the next iteration.
		if err := a.put(ctx, "j:"+a.delta, fmt.Sprintf("%d %d", a.iter+1, a.expected)); err != nil {
			return "", false, err
		}
	}
	a.delta = ""
	return wire.RCFinalized, false, nil
}

// account adds the iteration's step to the root's record of its change.
func (a *kvApp) account(line *report.Iter, status string) {
	if line.Delta == "" {
		return
	}
	for i := len(a.changes) - 1; i >= 0; i-- {
		c := a.changes[i]
		if c.Delta != line.Delta {
			continue
		}
		line.RCN = c.N
		c.Phase3MS = math.Round((c.Phase3MS+line.Phase3MS)*1e3) / 1e3
		c.CommMS += line.CommMS
		c.OverheadMS = math.Round((c.OverheadMS+line.RCMS)*1e3) / 1e3
		c.LastIter = line.Iter
		if status == wire.RCPending {
			c.PendingIters++
		} else {
			c.To = len(a.members)
			a.ended++
			a.nextDue = line.Iter + a.c.freq
		}
		return
	}
}

// reportEnd writes the change lines (with the runtime's step times) and
// the end line, as c-synthetic does.
func (a *kvApp) reportEnd(ctx context.Context) error {
	for _, c := range a.changes {
		// A SUB's exits come after FINALIZED: wait a little for them.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		q, err := a.s.WaitRC(wctx, session.QueryOptions{Delta: c.Delta}, func(q session.RC) bool {
			return q.Type != wire.RCSub || q.Record.Times.Exited != 0
		})
		cancel()
		if err != nil && q.Record.Delta == "" {
			return fmt.Errorf("record of %s: %w", c.Delta, err)
		}
		c.Status = q.Status
		report.ChangeTimes(c, q.Record)
		a.w.Line(c)
	}
	a.w.Line(report.End{
		Kind: report.KindEnd, Mode: modeInc, Trigger: a.c.trigger, Start: a.c.start, Limit: a.c.limit, Delta: a.c.delta,
		Freq: a.c.freq, Blocking: a.c.blocking, Problem: a.c.problem, Count: a.expected, FinalProcs: len(a.members),
		WallMS: report.MS(time.Since(a.started)), Changes: len(a.changes), Iters: a.iter,
	})
	return a.w.Err()
}
