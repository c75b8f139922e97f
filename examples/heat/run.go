package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/comm"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// Message tags of the point-to-point traffic.
const (
	tagUp   = 1 // a process's first row, to the rank above (its lower ghost row)
	tagDown = 2 // a process's last row, to the rank below
	tagMove = 3 // rows moving to their new owner after a change
)

// What the root tells the others at a check (a byte, then the delta).
const (
	actNone   byte = iota // carry on
	actAdapt              // a new change: phases 2 and 3
	actAgain              // a pending grow was confirmed (or aborted): accept again
	actWait               // the steps are done but a change is still coming: check again
	actFinish             // gather the grid and end
)

// heat is one process of the solver.
type heat struct {
	cfg config
	s   *session.Session
	ep  *comm.Endpoint
	out io.Writer
	log *slog.Logger

	c    *comm.Comm   // over set
	set  wire.PsetRef // the version of the application set c spans
	b    *block       // the rows this process holds
	step int          // steps done
	res  float64      // the latest residual
	hist History      // the root's record (handed on with every change)
	seg  Segment      // the steps since the last change (counted by every process, kept by the root)
	fl   *flight      // a grow accepted but not confirmed yet
	// joined: this process came with a grow, which the others completed
	// at a check; they compute next, so it skips its first check.
	joined bool

	// --buddy: the checkpoints (recover.go).
	ck     ckStore
	ckComm *comm.Comm      // the communicator the buddies were chosen for
	buddy  []int           // each member's buddy in ckComm (-1: none)
	failed map[string]bool // failure changes handled
	// unrecorded: failure changes accepted whose recovery another loss
	// interrupted; the next recovery records them.
	unrecorded []Change

	// Only the root uses these.
	sched       []Request
	reqs        chan wire.RC // requests to send (Type, N, Ranks)
	reqDone     chan error
	outstanding int
	issued      int // requests of the schedule handed to the requester
}

// flight is a change between its first accept and its completion.
type flight struct {
	rc     session.RC
	newSet string // the root's phase-2 set, name@version
	ch     Change
	t0     time.Time              // first accept started
	req    *session.AcceptRequest // this process's accept request
}

func run(ctx context.Context, cfg config, stdout io.Writer, log *slog.Logger) error {
	s, err := session.Init(ctx, session.WithLogger(log))
	if err != nil {
		return err
	}
	ep, err := comm.Open(ctx, s, comm.Options{Logger: log, TCPOnly: cfg.tcp})
	if err != nil {
		s.Finalize(ctx)
		return err
	}
	h := &heat{cfg: cfg, s: s, ep: ep, out: stdout, log: log, failed: map[string]bool{}, ck: ckStore{last: -1, nx: cfg.nx, ny: cfg.ny}}
	err = h.main(ctx)
	if err != nil && !errors.Is(err, errGone) {
		// One process failing would leave the others waiting in a halo
		// exchange until their timeout: end the job at once instead.
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.Abort(actx, 1, fmt.Sprintf("heat rank %d: %v", s.Rank(), err))
		cancel()
	}
	if errors.Is(err, errGone) {
		err = nil
	}
	ep.Close()
	if ferr := s.Finalize(ctx); err == nil {
		err = ferr
	}
	return err
}

// errGone ends a new process whose change was aborted before it could
// join: the runtime removes it, the job goes on without it.
var errGone = errors.New("heat: the change that started this process was aborted")

func (h *heat) main(ctx context.Context) error {
	q, err := h.s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
	if err != nil {
		return err
	}
	if q.Incl && q.Type == wire.RCAdd && (q.Status == wire.RCAnnounced || q.Status == wire.RCPending) {
		if err := h.join(ctx, q.Delta); err != nil {
			return err
		}
	} else if q.Incl && q.Type == wire.RCReplace && session.FailureDue(q, nil) {
		// Started in place of lost processes (--on-failure replace).
		if err := h.joinRecovery(ctx, q); err != nil {
			return err
		}
	} else if err := h.start(ctx); err != nil {
		return err
	}
	if h.c.Rank() == 0 && len(h.cfg.schedule) > 0 {
		h.startRequester(ctx)
	}
	defer func() {
		if h.reqs != nil {
			close(h.reqs)
		}
	}()
	for {
		wctx, stop := h.watch(ctx)
		var left bool
		var err error
		if h.cfg.buddy && h.ck.last < 0 {
			// The first checkpoint: everyone at step 0 (a process that
			// joined took part in the one after its change). Under the
			// watch like the steps: a loss while it is taken rolls back
			// to step 0, the initial grid (ckStore).
			err = h.checkpoint(wctx)
		}
		if err == nil {
			left, err = h.loop(wctx)
		}
		if err == nil && !left {
			err = h.finish(wctx)
		}
		stop()
		if err == nil || left {
			return err
		}
		// A lost process: with --buddy, recover and go on.
		f, err := h.lost(ctx, wctx, err)
		for err == nil {
			// Under a watch too: another loss during the recovery
			// brings the change that follows it (the runtime aborts
			// this one if a survivor dies before it is accepted).
			h.failed[f.Delta] = true
			rctx, stop := h.watch(ctx)
			rerr := h.recover(rctx, f)
			stop()
			if rerr == nil {
				break
			}
			f, err = h.lost(ctx, rctx, rerr)
		}
		if err != nil {
			return err
		}
	}
}

// start is the beginning of a process launched with the job: a
// communicator over the application set as launched, and its block of the
// initial grid.
func (h *heat) start(ctx context.Context) error {
	h.set = wire.PsetRef{Name: session.AppSet(h.s.App())}
	c, err := h.ep.New(ctx, h.set, "heat:start")
	if err != nil {
		return fmt.Errorf("communicator over %s: %w", h.set.Name, err)
	}
	if c.Size() > h.cfg.nx {
		return wire.Errorf(wire.ErrInvalid, "%d processes for %d rows: every process needs a row", c.Size(), h.cfg.nx)
	}
	h.c = c
	h.b = newBlock(h.cfg.nx, h.cfg.ny, Block(h.cfg.nx, c.Size(), c.Rank()))
	h.b.fill()
	h.seg = Segment{Procs: c.Size()}
	h.sched = h.cfg.schedule
	if c.Rank() == 0 && h.cfg.json {
		// Every process is in the communicator: from now on a loss is
		// survived with --buddy (before, there is no one to recover).
		h.printJSON(struct {
			Kind  string `json:"kind"`
			Procs int    `json:"procs"`
		}{"start", c.Size()})
	}
	return nil
}

// join is the beginning of a process an ADD started: confirm (listing
// 6.6), the communicator over the new set, and its rows from the others.
func (h *heat) join(ctx context.Context, delta string) error {
	set, err := h.s.Confirm(ctx, delta, session.ConfirmOptions{})
	if errors.Is(err, wire.ErrAborted) {
		return errGone
	}
	if err != nil {
		return fmt.Errorf("confirm %s: %w", delta, err)
	}
	c, err := h.ep.New(ctx, set, commTag(delta))
	if err != nil {
		return fmt.Errorf("communicator over %s@%d: %w", set.Name, set.Version, err)
	}
	h.b = newBlock(h.cfg.nx, h.cfg.ny, Range{})
	h.joined = true
	if err := h.redistribute(ctx, c, true, nil); err != nil {
		return err
	}
	h.c, h.set = c, set
	if h.cfg.buddy {
		return h.checkpoint(ctx) // as the others do after the change
	}
	return nil
}

func commTag(delta string) string { return "heat:" + delta }

// startRequester runs the root's requests one after the other on a
// goroutine: a queued request waits until the change before it has
// settled, which needs the root's accept, so the loop must not wait for
// it.
func (h *heat) startRequester(ctx context.Context) {
	h.reqs = make(chan wire.RC, len(h.sched))
	h.reqDone = make(chan error, len(h.sched))
	go func() {
		for r := range h.reqs {
			_, err := h.s.RequestRC(ctx, r.Type, int(r.N), session.RequestOptions{Ranks: r.Ranks.Ranks(), Queue: true})
			if err != nil {
				err = fmt.Errorf("request %s %d %s: %w", r.Type, r.N, r.Ranks, err)
			}
			h.reqDone <- err
		}
	}()
}

// issue hands the requests of this step to the requester.
func (h *heat) issue() error {
	for len(h.sched) > 0 && h.sched[0].Step <= h.step {
		r := h.sched[0]
		if len(r.Ranks) > 0 && len(h.hist.Changes) < h.issued {
			// Its ranks count in the set after the changes asked for
			// before it, which may still be on their way (a request
			// answers at once): it waits until they have ended.
			return nil
		}
		h.sched = h.sched[1:]
		h.issued++
		req := wire.RC{Type: r.Type, N: uint32(r.N)}
		for _, k := range r.Ranks {
			if k >= h.c.Size() {
				return wire.Errorf(wire.ErrInvalid, "schedule at step %d removes rank %d of %d processes", r.Step, k, h.c.Size())
			}
			req.Ranks = req.Ranks.Add(h.c.JobRank(k))
		}
		if len(r.Ranks) > 0 {
			req.N = 0
		}
		h.outstanding++
		h.reqs <- req
	}
	return nil
}

// loop computes the steps and takes part in every change until the end
// (or until a shrink removes this process: left).
func (h *heat) loop(ctx context.Context) (left bool, err error) {
	for {
		finishing := h.step >= h.cfg.steps
		if h.c.Rank() == 0 && h.reqs != nil {
			// Also when finishing: a request waiting for the changes
			// before it goes out then.
			if err := h.issue(); err != nil {
				return false, err
			}
		}
		for h.c.Rank() != 0 && len(h.sched) > 0 && h.sched[0].Step <= h.step {
			// Kept in step with the root's, for a successor should the
			// root be lost (--buddy).
			h.sched = h.sched[1:]
		}
		if h.joined {
			h.joined = false
		} else if finishing || h.step%h.cfg.check == 0 {
			t0 := time.Now()
			act, delta, err := h.agree(ctx, finishing)
			if err != nil {
				return false, err
			}
			took := time.Since(t0)
			switch act {
			case actNone:
				h.seg.Check += took
				if h.cfg.buddy && !finishing && h.step-h.ck.last >= h.cfg.ckEvery {
					err = h.checkpoint(ctx)
				}
			case actWait:
				if h.c.Rank() == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			case actAdapt:
				left, err = h.adapt(ctx, delta, took)
			case actAgain:
				left, err = h.accept(ctx, h.fl)
			case actFinish:
				return false, nil
			default:
				return false, wire.Errorf(wire.ErrInvalid, "unknown decision %d from the root", act)
			}
			if err != nil || left {
				return left, err
			}
		}
		if !finishing {
			if err := h.compute(ctx); err != nil {
				return false, err
			}
		}
	}
}

// agree makes the root's decision everyone's.
func (h *heat) agree(ctx context.Context, finishing bool) (byte, string, error) {
	var msg []byte
	if h.c.Rank() == 0 {
		act, delta, err := h.decide(ctx, finishing)
		if err != nil {
			return 0, "", err
		}
		msg = append([]byte{act}, delta...)
	}
	msg, err := h.c.Bcast(ctx, 0, msg)
	if err != nil {
		return 0, "", fmt.Errorf("decision at step %d: %w", h.step, err)
	}
	if len(msg) == 0 {
		return 0, "", wire.Errorf(wire.ErrInvalid, "empty decision from the root")
	}
	return msg[0], string(msg[1:]), nil
}

// decide is the root's look at the runtime (phase 1: a query answered by
// its daemon).
func (h *heat) decide(ctx context.Context, finishing bool) (byte, string, error) {
	for drained := false; h.outstanding > 0 && !drained; {
		select {
		case err := <-h.reqDone:
			h.outstanding--
			if err != nil {
				return 0, "", err
			}
		default:
			drained = true
		}
	}
	if h.fl != nil {
		// A grow accepted without blocking: once the root's request has
		// completed (confirmed or aborted), everyone completes its own.
		_, done, _ := h.fl.req.Test()
		switch {
		case done:
			return actAgain, h.fl.rc.Delta, nil
		case finishing:
			return actWait, "", nil
		}
		return actNone, "", nil
	}
	r, err := h.s.QueryRC(ctx, session.QueryOptions{Bound: h.set.Name})
	if err != nil {
		return 0, "", err
	}
	if session.FailureDue(r, h.handled) {
		if !h.cfg.buddy {
			return 0, "", errNoBuddy(r)
		}
		// Handled outside the steps (recover), by every survivor.
		return 0, "", &session.LostError{RC: r}
	}
	if !r.Null() { // QueryRC reports a change only while it needs this process
		switch r.Status {
		case wire.RCAnnounced, wire.RCPending:
			return actAdapt, r.Delta, nil
		case wire.RCAborted:
			// Aborted before the application took part.
			h.record(Change{Delta: r.Delta, Type: r.Type, Status: wire.RCAborted, From: h.c.Size(), To: h.c.Size(), Step: h.step})
		}
	}
	if finishing {
		// A request answers at once, queued or not: the run ends only
		// once every change it asked for has ended too.
		if h.outstanding > 0 || len(h.sched) > 0 && h.reqs != nil || len(h.hist.Changes) < max(h.cfg.wait, h.issued) {
			return actWait, "", nil
		}
		return actFinish, "", nil
	}
	return actNone, "", nil
}

// compute does one step: ghost rows, the sweep, and now and then the
// residual.
func (h *heat) compute(ctx context.Context) error {
	t0 := time.Now()
	if err := h.halo(ctx); err != nil {
		return fmt.Errorf("halo exchange at step %d: %w", h.step, err)
	}
	t1 := time.Now()
	diff := h.b.step()
	t2 := time.Now()
	h.step++
	h.seg.Steps++
	h.seg.Halo += t1.Sub(t0)
	h.seg.Compute += t2.Sub(t1)
	if h.step%h.cfg.resEvery == 0 || h.step == h.cfg.steps {
		r, err := comm.Allreduce(ctx, h.c, comm.Max, []float64{diff})
		if err != nil {
			return fmt.Errorf("residual at step %d: %w", h.step, err)
		}
		h.res = r[0]
		h.seg.Residual += time.Since(t2)
	}
	if h.fl != nil {
		h.fl.ch.PendingSteps++
	}
	return nil
}

// halo swaps boundary rows with the neighbours.
func (h *heat) halo(ctx context.Context) error {
	r, n, b := h.c.Rank(), h.c.Size(), h.b
	var sends []*comm.Request
	var up, down *comm.Request
	if r > 0 {
		sends = append(sends, h.c.Isend(r-1, tagUp, encodeFloats(b.row(b.rows.Lo))))
		up = h.c.Irecv(r-1, tagDown)
	}
	if r < n-1 {
		sends = append(sends, h.c.Isend(r+1, tagDown, encodeFloats(b.row(b.rows.Hi-1))))
		down = h.c.Irecv(r+1, tagUp)
	}
	for _, x := range []struct {
		req *comm.Request
		row int
	}{{up, b.rows.Lo - 1}, {down, b.rows.Hi}} {
		if x.req == nil {
			continue
		}
		data, _, err := x.req.Wait(ctx)
		if err != nil {
			return err
		}
		vals, err := decodeFloats(data)
		if err == nil && len(vals) != b.ny {
			err = wire.Errorf(wire.ErrInvalid, "ghost row %d of %d values, want %d", x.row, len(vals), b.ny)
		}
		if err != nil {
			return err
		}
		b.put(x.row, vals)
	}
	return comm.WaitAll(ctx, sends...)
}

// adapt takes part in a new change: phase 2 at the root, then the first
// accept.
func (h *heat) adapt(ctx context.Context, delta string, phase1 time.Duration) (bool, error) {
	// Rank 0 named the change: this process's daemon may get its record
	// a moment later, which WaitRC waits for.
	r, err := h.s.WaitRC(ctx, session.QueryOptions{Delta: delta}, func(session.RC) bool { return true })
	if err != nil {
		return false, err
	}
	var ref wire.PsetRef
	for _, b := range r.Record.BoundRefs {
		if b.Name == h.set.Name {
			ref = b
		}
	}
	if ref != h.set {
		return false, wire.Errorf(wire.ErrState, "change %s is bound to %v, this process works with %s@%d", delta, r.Record.BoundRefs, h.set.Name, h.set.Version)
	}
	f := &flight{rc: r, ch: Change{
		Delta: delta, Type: r.Type, From: h.c.Size(), To: h.c.Size(), Step: h.step,
		Phase1: phase1, SegBefore: len(h.hist.Segments),
	}}
	if h.c.Rank() == 0 {
		ts := r.Record.Times
		if ts.Announced > 0 && ts.Requested > 0 {
			f.ch.RTPhase1 = time.Duration(ts.Announced - ts.Requested)
			f.ch.Seen = time.Duration(time.Now().UnixNano() - ts.Announced)
		}
		op := session.OpUnion
		if r.Type == wire.RCSub {
			op = session.OpDifference
		}
		t0 := time.Now()
		res, err := h.s.PsetOp(ctx, op, h.set.Name, delta, session.PsetOpOptions{Target: h.set.Name})
		f.ch.Phase2 = time.Since(t0)
		switch {
		case err == nil:
			f.newSet = res.Ref().String()
		case !errors.Is(err, wire.ErrAborted):
			return false, fmt.Errorf("phase 2 of %s: %s(%s, %s): %w", delta, op, h.set.Name, delta, err)
		}
		// Aborted meanwhile: accept without a set, and everyone learns
		// the abort from the accept.
	}
	return h.accept(ctx, f)
}

// accept is phase 3 over the communicator (thesis listing 6.5); a grow
// whose new processes have not confirmed yet stays in flight and the steps
// go on.
func (h *heat) accept(ctx context.Context, f *flight) (bool, error) {
	if f.ch.Accepts == 0 {
		f.t0 = time.Now()
	}
	t0 := time.Now()
	if f.req == nil {
		o := session.AcceptOptions{Bound: h.set.Name, Over: h.c}
		if f.newSet != "" {
			var err error
			if o.NewSet, err = session.ParseSetVersion(f.newSet); err != nil {
				return false, err
			}
		}
		f.req = h.s.Accept(ctx, f.rc.Delta, o)
		if !h.cfg.blocking && f.rc.Type == wire.RCAdd {
			// Non-blocking: the steps go on while the new processes
			// start; the root looks at its request at every check.
			f.ch.Phase3 += time.Since(t0)
			f.ch.Accepts++
			h.fl = f
			return false, nil
		}
	}
	acc, err := f.req.Wait(ctx)
	f.ch.Phase3 += time.Since(t0)
	f.ch.Accepts++
	h.fl = nil
	if errors.Is(err, wire.ErrAborted) {
		f.ch.Status = wire.RCAborted
		h.record(f.ch)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("accept %s: %w", f.rc.Delta, err)
	}
	if f.ch.Accepts > 1 {
		f.ch.Pending = time.Since(f.t0)
	}
	return h.complete(ctx, f, acc)
}

// complete switches to the new set: communicator, rows, history.
func (h *heat) complete(ctx context.Context, f *flight, acc session.AcceptResult) (bool, error) {
	ref := acc.NewSet
	if ref.Name == "" {
		// A shrink's accept need not name the set: take the root's
		// phase-2 result.
		v, err := h.c.Bcast(ctx, 0, []byte(f.newSet))
		if err != nil {
			return false, err
		}
		if ref, err = parseRef(string(v)); err != nil {
			return false, fmt.Errorf("set after %s: %w", f.rc.Delta, err)
		}
	}
	old := h.c
	f.ch.Status, f.ch.Step = wire.RCFinalized, h.step
	if f.rc.Type == wire.RCAdd {
		t0 := time.Now()
		nc, err := h.ep.New(ctx, ref, commTag(f.rc.Delta))
		f.ch.Comm = time.Since(t0)
		if err != nil {
			return false, fmt.Errorf("communicator over %s@%d: %w", ref.Name, ref.Version, err)
		}
		if err := h.redistribute(ctx, nc, true, &f.ch); err != nil {
			return false, err
		}
		h.c, h.set = nc, ref
		if err := old.Free(ctx); err != nil {
			return false, err
		}
		return false, h.afterChange(ctx)
	}
	// A shrink: the staying processes build the new communicator while
	// the leaving ones wait in the redistribution over the old one.
	var nc *comm.Comm
	if !acc.Terminate {
		t0 := time.Now()
		var err error
		if nc, err = h.ep.New(ctx, ref, commTag(f.rc.Delta)); err != nil {
			return false, fmt.Errorf("communicator over %s@%d: %w", ref.Name, ref.Version, err)
		}
		f.ch.Comm = time.Since(t0)
	}
	if err := h.redistribute(ctx, old, !acc.Terminate, &f.ch); err != nil {
		return false, err
	}
	if err := old.Free(ctx); err != nil {
		return false, err
	}
	if acc.Terminate {
		return true, nil
	}
	if want := Block(h.cfg.nx, nc.Size(), nc.Rank()); h.b.rows != want {
		return false, wire.Errorf(wire.ErrState, "after %s rank %d of %d holds rows %s, want %s", f.rc.Delta, nc.Rank(), nc.Size(), h.b.rows, want)
	}
	h.c, h.set = nc, ref
	return false, h.afterChange(ctx)
}

// afterChange takes a checkpoint with the new decomposition and buddies
// (--buddy): the pieces of the one before no longer match the members.
func (h *heat) afterChange(ctx context.Context) error {
	if !h.cfg.buddy {
		return nil
	}
	return h.checkpoint(ctx)
}

func parseRef(s string) (wire.PsetRef, error) {
	name, v, ok := strings.Cut(s, "@")
	n, err := strconv.ParseUint(v, 10, 32)
	if !ok || name == "" || err != nil {
		return wire.PsetRef{}, wire.Errorf(wire.ErrInvalid, "set %q: want name@version", s)
	}
	return wire.PsetRef{Name: name, Version: uint32(n)}, nil
}

// redistribute moves the rows to the decomposition over the members of
// over that stay, collectively over over (the communicator holding every
// process before and after the change). ch is the change being completed
// (nil for a new process); the member that was root before the change
// completes it and hands its history to everyone.
func (h *heat) redistribute(ctx context.Context, over *comm.Comm, stay bool, ch *Change) error {
	t0 := time.Now()
	me := make([]byte, 26)
	step := int64(-1)
	if h.c != nil {
		step = int64(h.step)
	}
	binary.LittleEndian.PutUint64(me[0:], uint64(step))
	binary.LittleEndian.PutUint64(me[8:], uint64(h.b.rows.Lo))
	binary.LittleEndian.PutUint64(me[16:], uint64(h.b.rows.Hi))
	if stay {
		me[24] = 1
	}
	if h.c != nil && h.c.Rank() == 0 {
		me[25] = 1
	}
	all, err := over.Allgather(ctx, me)
	if err != nil {
		return fmt.Errorf("redistribution: %w", err)
	}
	cur := make([]Range, len(all))
	stays := make([]bool, len(all))
	histRoot := -1
	for i, m := range all {
		if len(m) != len(me) {
			return wire.Errorf(wire.ErrInvalid, "redistribution: member %d sent %d bytes", i, len(m))
		}
		step = max(step, int64(binary.LittleEndian.Uint64(m[0:])))
		cur[i] = Range{int(binary.LittleEndian.Uint64(m[8:])), int(binary.LittleEndian.Uint64(m[16:]))}
		stays[i] = m[24] == 1
		if m[25] == 1 {
			histRoot = i
		}
	}
	if histRoot < 0 || step < 0 {
		return wire.Errorf(wire.ErrState, "redistribution: no member ran before the change")
	}
	target, moves, err := Plan(h.cfg.nx, cur, stays)
	if err != nil {
		return err
	}
	nb, moved, err := h.moveRows(ctx, over, target, moves, func(r Range) ([]float64, error) { return h.b.held(r), nil })
	if err != nil {
		return fmt.Errorf("redistribution: %w", err)
	}
	h.b, h.step = nb, int(step)
	nStay := 0
	for _, s := range stays {
		if s {
			nStay++
		}
	}
	var chs []Change
	if ch != nil {
		ch.Redist, ch.MovedRows, ch.To = time.Since(t0), moved, nStay
		chs = []Change{*ch}
	}
	return h.shareHistory(ctx, over, histRoot, chs, nStay)
}

// moveRows carries out moves over over (member From sends rows to member
// To, rows gives what this member sends) and returns this member's new
// block, target[over.Rank()], and the rows that changed process.
func (h *heat) moveRows(ctx context.Context, over *comm.Comm, target []Range, moves []Move, rows func(Range) ([]float64, error)) (*block, int, error) {
	my := over.Rank()
	nb := newBlock(h.cfg.nx, h.cfg.ny, target[my])
	var sends, recvs []*comm.Request
	var from []Move
	moved := 0
	for _, m := range moves {
		if m.From != m.To {
			moved += m.Rows.Len()
		}
		if m.From != my && m.To != my {
			continue
		}
		if m.From != my {
			recvs = append(recvs, over.Irecv(m.From, tagMove))
			from = append(from, m)
			continue
		}
		vals, err := rows(m.Rows)
		switch {
		case err != nil:
			return nil, 0, err
		case m.To == my:
			nb.put(m.Rows.Lo, vals)
		default:
			sends = append(sends, over.Isend(m.To, tagMove, rowsMsg(m.Rows.Lo, vals)))
		}
	}
	for i, r := range recvs {
		data, _, err := r.Wait(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("rows from rank %d: %w", from[i].From, err)
		}
		lo, vals, err := parseRowsMsg(data, h.cfg.ny)
		if err == nil && (lo != from[i].Rows.Lo || len(vals) != from[i].Rows.Len()*h.cfg.ny) {
			err = wire.Errorf(wire.ErrInvalid, "rank %d sent %d values from row %d, want rows %s", from[i].From, len(vals), lo, from[i].Rows)
		}
		if err != nil {
			return nil, 0, err
		}
		nb.put(lo, vals)
	}
	if err := comm.WaitAll(ctx, sends...); err != nil {
		return nil, 0, err
	}
	return nb, moved, nil
}

// shareHistory hands the history from the old root (histRoot, which
// records chs) to every member of over, so that whoever is root at the end
// can print it all; the next segment has procs processes.
func (h *heat) shareHistory(ctx context.Context, over *comm.Comm, histRoot int, chs []Change, procs int) error {
	var hist []byte
	var err error
	if over.Rank() == histRoot && len(chs) > 0 {
		h.hist.Segments = append(h.hist.Segments, h.seg)
		for _, c := range chs {
			h.record(c)
		}
		if hist, err = json.Marshal(h.hist); err != nil {
			return err
		}
	}
	if hist, err = over.Bcast(ctx, histRoot, hist); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	var got History
	if err := json.Unmarshal(hist, &got); err != nil {
		return wire.Errorf(wire.ErrInvalid, "history from rank %d: %w", histRoot, err)
	}
	h.hist = got
	h.seg = Segment{Procs: procs, FirstStep: h.step}
	return nil
}

// record keeps a change in the root's history and prints it.
func (h *heat) record(c Change) {
	h.hist.Changes = append(h.hist.Changes, c)
	if h.cfg.json {
		h.printJSON(struct {
			Kind string `json:"kind"`
			Change
			Overhead time.Duration `json:"o_rc_ns"`
		}{"change", c, c.Overhead()})
		return
	}
	fmt.Fprintf(h.out, "change %s %s %d→%d at step %d: %s; phase1 %s ms, phase2 %s ms, phase3 %s ms (%d accepts, %d steps pending), comm %s ms, redistribution %s ms (%d rows); O_rc %s ms\n",
		shortDelta(c.Delta), c.Type, c.From, c.To, c.Step, c.Status, ms(c.Phase1), ms(c.Phase2), ms(c.Phase3),
		c.Accepts, c.PendingSteps, ms(c.Comm), ms(c.Redist), c.MovedRows, ms(c.Overhead()))
	if c.Lost != "" {
		fmt.Fprintf(h.out, "  a failure: ranks %s lost, rolled back %d steps to the last complete checkpoint\n", c.Lost, c.Rollback)
	}
}

func (h *heat) printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		h.log.Error("json", "err", err)
		return
	}
	fmt.Fprintf(h.out, "%s\n", b)
}

// finish gathers the grid at the root, which writes it and the summary.
func (h *heat) finish(ctx context.Context) error {
	parts, err := h.c.Gather(ctx, 0, rowsMsg(h.b.rows.Lo, h.b.held(h.b.rows)))
	if err != nil {
		return fmt.Errorf("gather: %w", err)
	}
	if h.c.Rank() == 0 {
		if err := h.report(parts); err != nil {
			return err
		}
	}
	return h.c.Free(ctx)
}

func (h *heat) report(parts [][]byte) error {
	g := Grid{NX: h.cfg.nx, NY: h.cfg.ny, Steps: h.step, V: make([]float64, h.cfg.nx*h.cfg.ny)}
	rows := 0
	for i, p := range parts {
		lo, vals, err := parseRowsMsg(p, h.cfg.ny)
		if err == nil && (lo < 0 || lo*h.cfg.ny+len(vals) > len(g.V)) {
			err = wire.Errorf(wire.ErrInvalid, "rows %d+%d outside the grid", lo, len(vals)/h.cfg.ny)
		}
		if err != nil {
			return fmt.Errorf("gather from rank %d: %w", i, err)
		}
		copy(g.V[lo*h.cfg.ny:], vals)
		rows += len(vals) / h.cfg.ny
	}
	if rows != h.cfg.nx {
		return wire.Errorf(wire.ErrState, "gathered %d rows of %d", rows, h.cfg.nx)
	}
	if h.cfg.out != "" {
		f, err := os.Create(h.cfg.out)
		if err != nil {
			return err
		}
		err = WriteGrid(f, g)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", h.cfg.out, err)
		}
	}
	h.hist.Segments = append(h.hist.Segments, h.seg)
	if h.cfg.json {
		for _, s := range h.hist.Segments {
			h.printJSON(struct {
				Kind string `json:"kind"`
				Segment
				StepTime time.Duration `json:"step_ns"`
			}{"segment", s, s.StepTime()})
		}
		h.printJSON(struct {
			Kind         string         `json:"kind"`
			Checkpoints  *ckReport      `json:"checkpoints,omitempty"`
			NX           int            `json:"nx"`
			NY           int            `json:"ny"`
			Steps        int            `json:"steps"`
			Procs        int            `json:"procs"`
			Residual     float64        `json:"residual"`
			Changes      int            `json:"changes"`
			Amortisation []Amortisation `json:"amortisation"`
		}{"summary", h.ckReport(), h.cfg.nx, h.cfg.ny, h.step, h.c.Size(), h.res, len(h.hist.Changes), h.hist.Amortise()})
		return nil
	}
	if err := WriteSummary(h.out, h.cfg.nx, h.cfg.ny, h.step, h.res, h.hist); err != nil {
		return err
	}
	if r := h.ckReport(); r != nil {
		_, err := fmt.Fprintf(h.out, "checkpoints (--buddy, the root's): %d, %s ms in all, %.3f ms each; %d values sent to its buddy; buddies on other nodes: %v\n",
			r.N, ms(r.Took), float64(r.Took)/float64(max(r.N, 1))/1e6, r.Sent, r.Apart)
		return err
	}
	return nil
}

// ckReport is what the checkpoints cost the root (nil without --buddy).
type ckReport struct {
	N     int           `json:"n"`
	Took  time.Duration `json:"took_ns"`
	Sent  int           `json:"values_sent"`
	Apart bool          `json:"buddies_apart"`
}

func (h *heat) ckReport() *ckReport {
	if !h.cfg.buddy {
		return nil
	}
	return &ckReport{N: h.ck.n, Took: h.ck.took, Sent: h.ck.sent, Apart: h.ck.apart}
}
