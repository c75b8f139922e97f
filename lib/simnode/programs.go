package simnode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// Names of the built-in programs: a job on a simulated node runs one of
// them by this name (any directory: /sim/idle, idle).
const (
	// Idle runs until it is signalled, like `sleep infinity`.
	Idle = "idle"
	// Exit exits at once with the code of its first argument (default 0).
	Exit = "exit"
	// Fence opens a session, enters N fences over the whole job (first
	// argument, default 2), prints "FENCE <ns>" with the time of the last
	// one at rank 0, and then idles. With the second argument "collect"
	// each process commits a 36-byte value before each fence and the
	// fences collect the data, as an MPI library's wire-up through PMI
	// does; rank 0 then checks the last rank's value before printing.
	Fence = "fence"
	// Malleable opens a session and takes part in every resource change
	// of its application set, as internal/malleable does: the set's root
	// makes the new version with one set operation (phase 2), every
	// member accepts and every process an ADD started confirms (phase 3).
	// A process a SUB removes exits 0. With the argument "report" it
	// prints, after each change it took part in, "STATE <delta> <size>
	// <node> <local ranks>" from its daemon's job data (session.JobInfo).
	Malleable = "malleable"
)

// Programs returns the built-in programs.
func Programs() map[string]Program {
	return map[string]Program{Idle: idle, Exit: exit, Fence: fence, Malleable: malleable}
}

func idle(ctx context.Context, _ *Proc) int {
	<-ctx.Done()
	return 0
}

func exit(_ context.Context, p *Proc) int {
	if len(p.args) > 1 {
		if n, err := strconv.Atoi(p.args[1]); err == nil {
			return n
		}
		p.Println("exit: not a number:", p.args[1])
		return 2
	}
	return 0
}

// fail reports err the way the simulated programs do: a line and code 1.
func fail(p *Proc, err error) int {
	p.Println("ERROR", err)
	return 1
}

func fence(ctx context.Context, p *Proc) int {
	n := 2
	if len(p.args) > 1 {
		var err error
		if n, err = strconv.Atoi(p.args[1]); err != nil || n < 1 {
			return fail(p, fmt.Errorf("fence: want a count of fences, got %q", p.args[1]))
		}
	}
	collect := len(p.args) > 2 && p.args[2] == "collect"
	s, err := p.Session(ctx)
	if err != nil {
		return fail(p, err)
	}
	card := func(rank uint32, i int) []byte { return fmt.Appendf(nil, "%08d card of rank %014d", i, rank) }
	var last time.Duration
	for i := range n {
		t0 := time.Now()
		if collect {
			if err := s.Put("card", card(s.Rank(), i)); err != nil {
				return fail(p, err)
			}
			if err := s.Commit(ctx); err != nil {
				return fail(p, err)
			}
		}
		if err := s.Fence(ctx, nil, collect); err != nil {
			if ctx.Err() != nil {
				return 0
			}
			return fail(p, err)
		}
		last = time.Since(t0)
	}
	if collect && s.Rank() == 0 {
		r := uint32(s.Size() - 1)
		v, err := s.Get(ctx, r, "card")
		if err != nil {
			return fail(p, fmt.Errorf("fence: rank %d's data after the fences: %w", r, err))
		}
		if want := card(r, n-1); string(v) != string(want) {
			return fail(p, fmt.Errorf("fence: rank %d's data after the fences is %q, want %q", r, v, want))
		}
	}
	if s.Rank() == 0 {
		p.Println("FENCE", last.Nanoseconds())
	}
	<-ctx.Done()
	return 0
}

func malleable(ctx context.Context, p *Proc) int {
	s, err := p.Session(ctx)
	if err != nil {
		return fail(p, err)
	}
	report := func(delta string) error {
		if len(p.args) < 2 || p.args[1] != "report" {
			return nil
		}
		in, err := s.JobInfo(ctx)
		if err != nil {
			return err
		}
		p.Println("STATE", delta, in.Size, in.Node, in.LocalPeers.String())
		return nil
	}
	wake := make(chan struct{}, 1)
	if _, err := s.SubscribeRC(ctx, func(wire.RC) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}); err != nil {
		return failUnlessDone(ctx, p, err)
	}
	main := wire.PsetRef{Name: session.AppSet(s.App())}
	q, err := s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
	if err != nil {
		return failUnlessDone(ctx, p, err)
	}
	if q.Incl && q.Type == wire.RCAdd && (q.Status == wire.RCAnnounced || q.Status == wire.RCPending) {
		set, err := s.Confirm(ctx, q.Delta, session.ConfirmOptions{})
		if err != nil {
			return failUnlessDone(ctx, p, fmt.Errorf("confirm %s: %w", q.Delta, err))
		}
		main = set
		if err := report(q.Delta); err != nil {
			return failUnlessDone(ctx, p, err)
		}
	}
	for {
		r, err := s.QueryRC(ctx, session.QueryOptions{Bound: main.Name})
		if err != nil {
			return failUnlessDone(ctx, p, err)
		}
		if !r.Null() && (r.Status == wire.RCAnnounced || r.Status == wire.RCPending) {
			left, next, err := adapt(ctx, s, main, r)
			if err != nil {
				return failUnlessDone(ctx, p, err)
			}
			if left {
				_ = s.Finalize(ctx)
				return 0
			}
			if next.Name != "" {
				main = next
			}
			if err := report(r.Delta); err != nil {
				return failUnlessDone(ctx, p, err)
			}
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return 0
		}
	}
}

// adapt is phase 2 and 3 of a change for one member of its bound set.
func adapt(ctx context.Context, s *session.Session, main wire.PsetRef, r session.RC) (left bool, next wire.PsetRef, err error) {
	bound := main.Name
	var ref wire.PsetRef
	for _, b := range r.Record.BoundRefs {
		if b.Name == bound {
			ref = b
		}
	}
	members, err := s.Members(ctx, ref)
	if err != nil {
		return false, next, err
	}
	var newSet session.SetVersion
	if len(members) > 0 && s.Rank() == members[0].Lo {
		op := session.OpUnion
		if r.Type == wire.RCSub {
			op = session.OpDifference
		}
		res, err := s.PsetOp(ctx, op, bound, r.Delta, session.PsetOpOptions{Target: bound})
		switch {
		case err == nil:
			newSet = res.Ref()
		case !errors.Is(err, wire.ErrAborted):
			return false, next, fmt.Errorf("%s(%s, %s): %w", op, bound, r.Delta, err)
		}
	}
	acc, err := s.Accept(ctx, r.Delta, session.AcceptOptions{Bound: bound, NewSet: newSet}).Wait(ctx)
	if errors.Is(err, wire.ErrAborted) {
		return false, next, nil
	}
	if err != nil {
		return false, next, fmt.Errorf("accept %s: %w", r.Delta, err)
	}
	return acc.Terminate, acc.NewSet, nil
}

// failUnlessDone: an error after a signal is the signal's doing.
func failUnlessDone(ctx context.Context, p *Proc, err error) int {
	if ctx.Err() != nil {
		return 0
	}
	return fail(p, err)
}
