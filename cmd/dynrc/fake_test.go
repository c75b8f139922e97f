package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// fakeMaster is an in-memory stand-in for the master's RC services. It
// checks requests the way the runtime does (unknown job, busy, SUB of
// every process, ranks not in the job, pset not malleable), stamps steps at
// fixed offsets from t0, and lets each change end the way a test says.
type fakeMaster struct {
	mu       sync.Mutex
	jobs     []wire.JobInfo
	rcs      []*fakeRC
	reqs     []wire.RCRequest
	fates    []string // how the next changes end: FINALIZED, ABORTED or "" (never); default FINALIZED
	sel      string   // --dvm that connect saw
	connects int
	closes   int
	waits    []string // statuses WaitRC was asked for
}

type fakeRC struct {
	rc   wire.RC
	fate string
}

// t0 is when the first fake change is requested; each later one is
// requested a second after the previous one. Deltas are numbered from 1,
// as the master does.
var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func ns(base time.Time, d time.Duration) int64 { return base.Add(d).UnixNano() }

func newFake(jobs ...wire.JobInfo) *fakeMaster {
	return &fakeMaster{jobs: append([]wire.JobInfo(nil), jobs...)}
}

func job(id uint32, ns, app string, size uint32) wire.JobInfo {
	return wire.JobInfo{ID: id, Job: ns, App: app, Size: size, NextRank: size, State: wire.JobStateRunning}
}

func (f *fakeMaster) Close() error {
	f.mu.Lock()
	f.closes++
	f.mu.Unlock()
	return nil
}

func (f *fakeMaster) Jobs(context.Context) ([]wire.JobInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.JobInfo(nil), f.jobs...), nil
}

func (f *fakeMaster) find(delta string) (*fakeRC, error) {
	for _, r := range f.rcs {
		if r.rc.Delta == delta {
			return r, nil
		}
	}
	return nil, wire.Errorf(wire.ErrNotFound, "master: no resource change %s", delta)
}

func (f *fakeMaster) RequestRC(_ context.Context, req wire.RCRequest) (wire.RC, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	var j *wire.JobInfo
	for i := range f.jobs {
		if f.jobs[i].Job == req.Job {
			j = &f.jobs[i]
		}
	}
	if j == nil {
		return wire.RC{}, wire.Errorf(wire.ErrNotFound, "master: no job %q", req.Job)
	}
	queued := false
	for _, r := range f.rcs {
		if r.rc.Job == req.Job && !final(r.rc.Status) && req.Queue {
			queued = true
		} else if r.rc.Job == req.Job && !final(r.rc.Status) {
			return wire.RC{}, wire.Errorf(wire.ErrBusy, "master: job %s: resource change %s (%s, %s) is still in flight; one change per job at a time",
				req.Job, r.rc.Delta, r.rc.Type, r.rc.Status)
		}
	}
	for _, b := range req.Bound {
		if strings.HasSuffix(b, "/fixed") {
			return wire.RC{}, wire.Errorf(wire.ErrInvalid, "master: pset %s is not malleable", b)
		}
	}
	seq := len(f.rcs)
	base := t0.Add(time.Duration(seq) * time.Second)
	rc := wire.RC{
		Delta: fmt.Sprintf("mpi://rte/%s/rc/%d", j.App, seq+1), Job: req.Job, Type: req.Type, Status: wire.RCAnnounced,
		Requester: req.Requester, RequesterID: req.RequesterID, N: req.N,
	}
	switch req.Type {
	case wire.RCAdd:
		rc.Ranks = wire.Span(j.NextRank, j.NextRank+req.N-1)
		rc.Bound = req.Bound
		if len(rc.Bound) == 0 {
			rc.Bound = []string{"mpi://app/" + j.App}
		}
		rc.Placement = []wire.Placement{{Node: "node1", Ranks: rc.Ranks}}
		j.NextRank += req.N
		j.Size += req.N
	case wire.RCSub:
		if req.N >= j.Size {
			return wire.RC{}, wire.Errorf(wire.ErrInvalid, "master: job %s: cannot remove %d of its %d processes (a job keeps at least one)", req.Job, req.N, j.Size)
		}
		rc.Ranks = req.Ranks
		for r := range req.Ranks.All() {
			if r >= j.NextRank {
				return wire.RC{}, wire.Errorf(wire.ErrInvalid, "master: job %s has no rank %d", req.Job, r)
			}
		}
		if len(rc.Ranks) == 0 {
			rc.Ranks = wire.Span(j.NextRank-req.N, j.NextRank-1)
		}
		rc.Bound = []string{"mpi://app/" + j.App}
		rc.Placement = []wire.Placement{{Node: "node0", Ranks: rc.Ranks}}
		j.Size -= req.N
	}
	rc.Times = wire.RCTimes{
		Requested: ns(base, 0), Placed: ns(base, 100*time.Microsecond), Defined: ns(base, 300*time.Microsecond),
		JobData: ns(base, 500*time.Microsecond), Announced: ns(base, 600*time.Microsecond),
	}
	if req.Type == wire.RCAdd {
		rc.Times.Launched = ns(base, 700*time.Microsecond)
	}
	if queued { // waits in line: nothing done yet
		rc.Status, rc.Times = wire.RCNull, wire.RCTimes{Requested: rc.Times.Requested}
	}
	fate := wire.RCFinalized
	if len(f.fates) > 0 {
		fate, f.fates = f.fates[0], f.fates[1:]
	}
	f.rcs = append(f.rcs, &fakeRC{rc: rc, fate: fate})
	if queued && !req.Wait {
		// As the master: answered at once, before the change is numbered.
		return wire.RC{Job: rc.Job, Type: rc.Type, Status: rc.Status, N: rc.N, Requester: rc.Requester, RequesterID: rc.RequesterID, Times: rc.Times}, nil
	}
	return rc, nil
}

// end applies r's fate (called by the first wait).
func (f *fakeMaster) end(r *fakeRC) {
	if final(r.rc.Status) {
		return
	}
	base := time.Unix(0, r.rc.Times.Requested)
	t := &r.rc.Times
	switch r.fate {
	case wire.RCFinalized:
		r.rc.Status = wire.RCFinalized
		t.Accepted = ns(base, 20*time.Millisecond)
		t.Finalized = ns(base, 31*time.Millisecond)
		r.rc.Accepts = 1
		if r.rc.Type == wire.RCAdd {
			t.Started = ns(base, 10*time.Millisecond)
			t.Confirmed = ns(base, 30*time.Millisecond)
			r.rc.NewSet = &wire.PsetRef{Name: r.rc.Bound[0], Version: 1}
		} else {
			t.Exited = ns(base, 35*time.Millisecond)
			// One removed process leaves cleanly, the next one does not.
			for i, rank := range slices.Collect(r.rc.Ranks.All()) {
				p := wire.ProcInfo{Rank: rank, Node: "node0", State: wire.ProcStateExited, Ended: t.Exited}
				if i%2 == 1 {
					p.State, p.Code = wire.ProcStateExited, 5
				}
				r.rc.Ended = append(r.rc.Ended, p)
			}
		}
		r.rc.Settled = true
	case wire.RCAborted:
		r.rc.Status = wire.RCAborted
		t.Aborted = ns(base, 40*time.Millisecond)
		r.rc.Reason = "confirm timeout (30s)"
		r.rc.Settled = true
	}
}

func (f *fakeMaster) RC(_ context.Context, delta string) (wire.RC, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.find(delta)
	if err != nil {
		return wire.RC{}, err
	}
	return r.rc, nil
}

func (f *fakeMaster) WaitQueued(_ context.Context, q wire.RC) (wire.RC, error) {
	if q.Delta != "" {
		return q, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rcs {
		if r.rc.Job == q.Job && r.rc.RequesterID == q.RequesterID && r.rc.Times.Requested == q.Times.Requested {
			return r.rc, nil
		}
	}
	return wire.RC{}, wire.Errorf(wire.ErrNotFound, "fake: no queued change %+v", q)
}

func (f *fakeMaster) RCs(_ context.Context, job string) ([]wire.RC, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []wire.RC
	for _, r := range f.rcs {
		if job == "" || r.rc.Job == job {
			out = append(out, r.rc)
		}
	}
	return out, nil
}

func (f *fakeMaster) CancelRC(_ context.Context, delta, reason string) (wire.RC, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.find(delta)
	if err != nil {
		return wire.RC{}, err
	}
	if final(r.rc.Status) {
		return wire.RC{}, wire.Errorf(wire.ErrState, "master: resource change %s is already %s", delta, r.rc.Status)
	}
	r.rc.Status, r.rc.Reason, r.rc.Settled = wire.RCAborted, reason, true
	r.rc.Times.Aborted = ns(time.Unix(0, r.rc.Times.Requested), 5*time.Millisecond)
	return r.rc, nil
}

// WaitRC ends the change as its fate says, then answers as lib/tool's
// WaitRC does.
func (f *fakeMaster) WaitRC(ctx context.Context, delta, status string) (wire.RC, error) {
	f.mu.Lock()
	f.waits = append(f.waits, status)
	r, err := f.find(delta)
	if err != nil {
		f.mu.Unlock()
		return wire.RC{}, err
	}
	f.end(r)
	rc := r.rc
	f.mu.Unlock()
	aborted := wire.Errorf(wire.ErrAborted, "tool: resource change %s was aborted: %s", rc.Delta, rc.Reason)
	switch {
	case status == "" && rc.Settled && rc.Status == wire.RCAborted:
		return rc, aborted
	case status == "" && rc.Settled, status != "" && rc.Status == status:
		return rc, nil
	case rc.Status == wire.RCAborted:
		return rc, aborted
	case status == wire.RCAborted && rc.Status == wire.RCFinalized:
		return rc, wire.Errorf(wire.ErrState, "tool: resource change %s is FINALIZED and cannot be ABORTED any more", rc.Delta)
	}
	<-ctx.Done()
	code := wire.ErrCanceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = wire.ErrTimeout
	}
	return rc, wire.Errorf(code, "tool: resource change %s is still %s: %w", delta, rc.Status, ctx.Err())
}

// fakeClock advances by step on every reading, and by d on every sleep.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// fakeEnv runs dynrc against f with a fake clock and the given stdin.
func fakeEnv(f *fakeMaster, stdin string) (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	clk := &fakeClock{t: t0, step: time.Millisecond}
	e := &env{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(string) string { return "" },
		now: clk.now, sleep: clk.sleep, loc: time.UTC, pid: 4242,
		connect: func(_ context.Context, sel string) (rcAPI, error) {
			f.mu.Lock()
			f.sel = sel
			f.connects++
			f.mu.Unlock()
			return f, nil
		},
	}
	return e, &out, &errb
}

// runFake runs `dynrc args...` against f.
func runFake(f *fakeMaster, args ...string) (int, string, string) {
	return runFakeCtx(context.Background(), f, "", args...)
}

func runFakeCtx(ctx context.Context, f *fakeMaster, stdin string, args ...string) (int, string, string) {
	e, out, errb := fakeEnv(f, stdin)
	code := run(ctx, e, append([]string{"dynrc"}, args...))
	return code, out.String(), errb.String()
}

var _ rcAPI = (*fakeMaster)(nil)
var _ io.Closer = (*fakeMaster)(nil)
