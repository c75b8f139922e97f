package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dynrt/dynrt/lib/comm"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// Surviving failures (--buddy, docs/heat.md "Failures"). Every process
// keeps checkpoints of its own rows and sends a copy to its buddy, a
// process on another node. Under the job's shrink failure policy a lost
// process becomes a SUB of its rank; the survivors roll back to the last
// checkpoint they hold completely between them, take the lost rows from
// the buddies' copies, spread the rows over themselves and go on. The
// steps are deterministic, so the final grid is the static run's.

const tagCkpt = 4 // a process's rows, to its buddy

// piece is rows of the grid kept in the checkpoint store.
type piece struct {
	Held
	vals []float64
}

// ckStore holds the pieces of the last two checkpoints: one may be
// incomplete when a process is lost while it is being taken. Until this
// process has taken its first checkpoint, the store also holds the whole
// grid as of step 0: that is the initial condition, which any process can
// compute, so a loss before or during the first checkpoint rolls back to
// step 0 instead of ending the run.
type ckStore struct {
	pieces []piece
	last   int // step of the latest checkpoint (-1: none)
	nx, ny int // the grid, for the rows of step 0 before the first checkpoint
	// What checkpoints cost this process: count, wall time, values sent.
	n     int
	took  time.Duration
	sent  int
	apart bool // every buddy on another node (at the latest checkpoint)
}

// add stores the pieces of a checkpoint at step and drops those older
// than the checkpoint before it. Pieces of the same step taken before
// (with another decomposition: a checkpoint right after a change) stay:
// where the new checkpoint did not complete everywhere, they may hold rows
// it lacks.
func (s *ckStore) add(step int, ps []piece) {
	prev := -1
	for _, p := range s.pieces {
		if p.Step < step {
			prev = max(prev, p.Step)
		}
	}
	s.pieces = slices.DeleteFunc(s.pieces, func(p piece) bool { return p.Step < prev })
	s.pieces = append(s.pieces, ps...)
	s.last = step
}

// rows returns rows r as of step, which one piece holds.
func (s *ckStore) rows(step int, r Range, ny int) ([]float64, error) {
	for _, p := range s.pieces {
		if p.Step == step && p.Rows.Lo <= r.Lo && r.Hi <= p.Rows.Hi {
			k := (r.Lo - p.Rows.Lo) * ny
			return p.vals[k : k+r.Len()*ny], nil
		}
	}
	if s.initial() && step == 0 && 0 <= r.Lo && r.Hi <= s.nx && ny == s.ny {
		b := newBlock(s.nx, s.ny, r)
		b.fill()
		return b.held(r), nil
	}
	return nil, wire.Errorf(wire.ErrState, "heat: no checkpoint of rows %s at step %d here", r, step)
}

func (s *ckStore) held() []Held {
	out := make([]Held, len(s.pieces), len(s.pieces)+1)
	for i, p := range s.pieces {
		out[i] = p.Held
	}
	if s.initial() {
		out = append(out, Held{0, Range{0, s.nx}})
	}
	return out
}

// initial says whether the store stands for the initial grid: no
// checkpoint taken here yet.
func (s *ckStore) initial() bool { return s.last < 0 && s.nx > 0 }

// checkpoint stores this process's rows as of now, sends a copy to its
// buddy and keeps the copies of the processes whose buddy it is.
// Collective over h.c: every member calls it at the same step.
func (h *heat) checkpoint(ctx context.Context) error {
	t0 := time.Now()
	if h.ckComm != h.c {
		// A new communicator: choose the buddies from the members' nodes.
		all, err := h.c.Allgather(ctx, []byte(h.s.Node()))
		if err != nil {
			return fmt.Errorf("checkpoint at step %d: nodes: %w", h.step, err)
		}
		nodes := make([]string, len(all))
		for i, b := range all {
			nodes[i] = string(b)
		}
		h.buddy, h.ck.apart = Buddies(nodes)
		h.ckComm = h.c
	}
	me := h.c.Rank()
	own := piece{Held{h.step, h.b.rows}, h.b.held(h.b.rows)}
	var sends, recvs []*comm.Request
	if b := h.buddy[me]; b >= 0 {
		sends = append(sends, h.c.Isend(b, tagCkpt, rowsMsg(own.Rows.Lo, own.vals)))
		h.ck.sent += len(own.vals)
	}
	for k, b := range h.buddy {
		if b == me && k != me {
			recvs = append(recvs, h.c.Irecv(k, tagCkpt))
		}
	}
	ps := []piece{own}
	for _, r := range recvs {
		data, st, err := r.Wait(ctx)
		if err != nil {
			return fmt.Errorf("checkpoint at step %d: %w", h.step, err)
		}
		lo, vals, err := parseRowsMsg(data, h.cfg.ny)
		if err == nil && (lo < 0 || lo+len(vals)/h.cfg.ny > h.cfg.nx) {
			err = wire.Errorf(wire.ErrInvalid, "rows %d+%d outside the grid", lo, len(vals)/h.cfg.ny)
		}
		if err != nil {
			return fmt.Errorf("checkpoint at step %d: copy from rank %d: %w", h.step, st.Source, err)
		}
		ps = append(ps, piece{Held{h.step, Range{lo, lo + len(vals)/h.cfg.ny}}, vals})
	}
	if err := comm.WaitAll(ctx, sends...); err != nil {
		return fmt.Errorf("checkpoint at step %d: %w", h.step, err)
	}
	h.ck.add(h.step, ps)
	h.ck.n++
	h.ck.took += time.Since(t0)
	return nil
}

// watch returns the context for the steps until the next failure: with
// --buddy it ends as soon as a failure change of the set is announced,
// so that no survivor waits for a peer that went to handle it.
func (h *heat) watch(ctx context.Context) (context.Context, func()) {
	if !h.cfg.buddy {
		return ctx, func() {}
	}
	return h.s.WatchFailure(ctx, h.set.Name, h.handled)
}

func (h *heat) handled(delta string) bool { return h.failed[delta] }

// lost finds the failure change behind err (an error of the steps run
// under wctx), waiting at most --failure-wait for it.
func (h *heat) lost(ctx, wctx context.Context, err error) (session.RC, error) {
	if !h.cfg.buddy {
		return session.RC{}, err
	}
	return h.s.FailureBehind(ctx, wctx, err, h.set.Name, h.handled, h.cfg.failureWait)
}

// errNoBuddy ends a run without --buddy that loses a process.
func errNoBuddy(r session.RC) error {
	return wire.Errorf(wire.ErrAborted, "ranks %s were lost (failure change %s) and heat runs without --buddy: their rows are gone; run with --buddy to survive a loss", r.Lost(), r.Delta)
}

// recover handles the failure change f as a survivor: phases 2 and 3 over
// the survivors, the rollback to the last complete checkpoint, the rows
// spread over the survivors, and a new checkpoint with new buddies.
// The caller has marked f handled before it started the watch of ctx
// (whose goroutine reads the mark).
func (h *heat) recover(ctx context.Context, f session.RC) error {
	t0 := time.Now()
	if f.Type != wire.RCSub && f.Type != wire.RCReplace {
		return wire.Errorf(wire.ErrUnsupported, "failure change %s is a %s: heat recovers from failure SUBs and REPLACEs", f.Delta, f.Type)
	}
	var ref wire.PsetRef
	for _, b := range f.Record.BoundRefs {
		if b.Name == h.set.Name {
			ref = b
		}
	}
	if ref.Name == "" {
		return wire.Errorf(wire.ErrState, "failure change %s is bound to %v, this process works with %s", f.Delta, f.Record.BoundRefs, h.set.Name)
	}
	old := h.c
	wasRoot := old.Rank() == 0
	ch := Change{Delta: f.Delta, Type: f.Type, From: old.Size(), Step: h.step, Lost: f.Lost().String(), SegBefore: len(h.hist.Segments)}
	if n := len(h.unrecorded); n > 0 {
		ch.From = h.unrecorded[n-1].To // after the change whose recovery was interrupted
	}
	if wasRoot && h.fl != nil {
		// The loss aborts a grow in flight (a member of its bound set
		// is gone); the runtime removes its new processes.
		h.fl.ch.Status = wire.RCAborted
		h.record(h.fl.ch)
	}
	h.fl = nil

	// The bound set's version has the survivors only: they build the
	// communicator of the recovery over it.
	t := time.Now()
	rc, err := h.ep.New(ctx, ref, commTag(f.Delta))
	if err != nil {
		return fmt.Errorf("recovery from %s: communicator over %s@%d: %w", f.Delta, ref.Name, ref.Version, err)
	}
	ch.Comm = time.Since(t)
	var newSet session.SetVersion
	if rc.Rank() == 0 {
		t := time.Now()
		newSet, err = h.s.SetAfter(ctx, h.set.Name, f)
		ch.Phase2 = time.Since(t)
		if err != nil {
			return fmt.Errorf("recovery from %s: phase 2: %w", f.Delta, err)
		}
	}
	// A REPLACE's accept waits for the new processes: they hold nothing
	// yet, and the rows wait for them.
	t = time.Now()
	acc, err := h.s.Accept(ctx, f.Delta, session.AcceptOptions{Bound: h.set.Name, NewSet: newSet, Over: rc}).Wait(ctx)
	ch.Phase3, ch.Accepts = time.Since(t), 1
	if err != nil {
		return fmt.Errorf("recovery from %s: accept: %w", f.Delta, err)
	}
	// Accepted: the change is done even if another loss interrupts what
	// follows, and is recorded then with the next one.
	ch.Status, ch.To = wire.RCFinalized, rc.Size()
	recorded := false
	defer func() {
		if !recorded {
			h.unrecorded = append(h.unrecorded, ch)
		}
	}()
	set := acc.NewSet
	if set.Name == "" {
		v, err := rc.Bcast(ctx, 0, []byte(newSet.String()))
		if err == nil {
			set, err = parseRef(string(v))
		}
		if err != nil {
			return fmt.Errorf("recovery from %s: the new set: %w", f.Delta, err)
		}
	}
	over := rc
	if f.Type == wire.RCReplace {
		// With the new processes, which start in joinRecovery.
		t := time.Now()
		if over, err = h.ep.New(ctx, set, commTag(f.Delta)); err != nil {
			return fmt.Errorf("recovery from %s: communicator over %s@%d: %w", f.Delta, set.Name, set.Version, err)
		}
		ch.Comm += time.Since(t)
		_ = rc.Free(ctx)
	}
	if err := h.restore(ctx, over, wasRoot, &ch, t0); err != nil {
		return fmt.Errorf("recovery from %s: %w", f.Delta, err)
	}
	recorded = true
	_ = old.Free(ctx) // its lost members cannot destruct: that is fine
	h.c, h.set = over, set
	if h.c.Rank() == 0 && h.reqs == nil && len(h.sched) > 0 {
		h.startRequester(ctx) // the root was lost: its successor asks for the rest
	}
	return h.checkpoint(ctx)
}

// joinRecovery is the beginning of a process a failure REPLACE started in
// place of lost ones: confirm, the communicator with the survivors, and
// its block of the rows restored from their checkpoints.
func (h *heat) joinRecovery(ctx context.Context, q session.RC) error {
	if !h.cfg.buddy {
		return wire.Errorf(wire.ErrInvalid, "started in place of lost processes (%s), but heat runs without --buddy: their rows are gone", q.Delta)
	}
	set, err := h.s.Confirm(ctx, q.Delta, session.ConfirmOptions{})
	if errors.Is(err, wire.ErrAborted) {
		return errGone
	}
	if err != nil {
		return fmt.Errorf("confirm %s: %w", q.Delta, err)
	}
	h.failed[q.Delta] = true
	c, err := h.ep.New(ctx, set, commTag(q.Delta))
	if err != nil {
		return fmt.Errorf("communicator over %s@%d: %w", set.Name, set.Version, err)
	}
	h.b = newBlock(h.cfg.nx, h.cfg.ny, Range{})
	if err := h.restore(ctx, c, false, nil, time.Now()); err != nil {
		return fmt.Errorf("recovery from %s: %w", q.Delta, err)
	}
	h.c, h.set = c, set
	return h.checkpoint(ctx)
}

// restore rolls every member of over back to the last checkpoint the
// members hold completely between them and gives each its block of the
// rows as of that step. The member that was root before (or rank 0 if it
// was lost) hands on the history with ch recorded.
func (h *heat) restore(ctx context.Context, over *comm.Comm, wasRoot bool, ch *Change, t0 time.Time) error {
	// The rows held now count too: they are exact as of h.step (after a
	// recovery that a second loss interrupted, they are the restored
	// state itself).
	store := h.ck
	if h.b.rows.Len() > 0 {
		store.pieces = append(slices.Clip(store.pieces), piece{Held{h.step, h.b.rows}, h.b.held(h.b.rows)})
	}
	mine := store.held()
	me := make([]byte, 9, 9+24*len(mine))
	if wasRoot {
		me[0] = 1
	}
	binary.LittleEndian.PutUint64(me[1:], uint64(h.step))
	for _, p := range mine {
		for _, v := range []int{p.Step, p.Rows.Lo, p.Rows.Hi} {
			me = binary.LittleEndian.AppendUint64(me, uint64(v))
		}
	}
	all, err := over.Allgather(ctx, me)
	if err != nil {
		return fmt.Errorf("checkpoints held: %w", err)
	}
	held := make([][]Held, len(all))
	histRoot := -1
	for i, m := range all {
		if len(m) < 9 || (len(m)-9)%24 != 0 {
			return wire.Errorf(wire.ErrInvalid, "member %d sent %d bytes of checkpoints", i, len(m))
		}
		if m[0] == 1 && histRoot < 0 {
			histRoot = i
		}
		for b := m[9:]; len(b) > 0; b = b[24:] {
			held[i] = append(held[i], Held{
				Step: int(binary.LittleEndian.Uint64(b)),
				Rows: Range{int(binary.LittleEndian.Uint64(b[8:])), int(binary.LittleEndian.Uint64(b[16:]))},
			})
		}
	}
	if histRoot < 0 {
		histRoot = 0
	}
	step, ok := Restorable(h.cfg.nx, held)
	if !ok {
		return wire.Errorf(wire.ErrState, "the survivors hold no complete checkpoint: rows were lost together with their buddy's copy (buddies on other nodes: %v; pieces held: %v)", h.ck.apart, held)
	}
	target, moves, err := RecoverPlan(h.cfg.nx, held, step)
	if err != nil {
		return err
	}
	nb, moved, err := h.moveRows(ctx, over, target, moves, func(r Range) ([]float64, error) { return store.rows(step, r, h.cfg.ny) })
	if err != nil {
		return fmt.Errorf("rows to the survivors: %w", err)
	}
	h.b, h.step = nb, step
	if ch != nil {
		ch.Redist, ch.MovedRows, ch.To = time.Since(t0)-ch.Comm-ch.Phase2-ch.Phase3, moved, over.Size()
		ch.Rollback = int(binary.LittleEndian.Uint64(all[histRoot][1:])) - step
	}
	var chs []Change
	if ch != nil {
		chs = append(h.unrecorded, *ch)
	}
	if err := h.shareHistory(ctx, over, histRoot, chs, over.Size()); err != nil {
		return err
	}
	h.unrecorded = nil
	return nil
}
