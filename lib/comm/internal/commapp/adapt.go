package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/dynrt/dynrt/lib/comm"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// adapt is the malleable loop of thesis listing 6.7 over communicators:
// on every change bound to its set the root of the current communicator
// builds the new set, all accept over the communicator (Accept with Over), and
// the processes that stay (and the new ones, after Confirm) build a
// communicator over the new set and check it with an allreduce. After a
// SUB the survivors also talk over the old communicator.
func (p *proc) adapt(ctx context.Context) error {
	s := p.s
	wake := make(chan struct{}, 1)
	if _, err := s.SubscribeRC(ctx, func(wire.RC) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}); err != nil {
		return err
	}
	done := map[string]bool{}
	var c *comm.Comm
	q, err := s.QueryRC(ctx, session.QueryOptions{Bound: session.Self})
	if err != nil {
		return err
	}
	if q.Incl && q.Type == wire.RCAdd && (q.Status == wire.RCAnnounced || q.Status == wire.RCPending) {
		if p.c.dieNew != 0 {
			os.Exit(p.c.dieNew)
		}
		set, err := s.Confirm(ctx, q.Delta, session.ConfirmOptions{})
		if err != nil {
			return fmt.Errorf("confirm %s: %w", q.Delta, err)
		}
		done[q.Delta] = true
		if c, err = p.settle(ctx, set, q.Delta, wire.RCFinalized); err != nil {
			return err
		}
	} else {
		set, err := s.PsetInfo(ctx, p.app)
		if err != nil {
			return err
		}
		if c, err = p.e.New(ctx, wire.PsetRef{Name: set.Name, Version: set.Version}, "main"); err != nil {
			return err
		}
		if _, err := allreduceCheck(ctx, c, 1); err != nil {
			return err
		}
		say("READY", map[string]any{"rank": p.me, "size": c.Size()})
	}
	for {
		r, err := s.QueryRC(ctx, session.QueryOptions{Bound: c.Set().Name})
		if err != nil {
			return err
		}
		if !r.Null() && !done[r.Delta] && (r.Status == wire.RCAnnounced || r.Status == wire.RCPending) {
			done[r.Delta] = true
			next, err := p.change(ctx, c, r)
			if err != nil {
				return err
			}
			c = next
			continue
		}
		if !r.Null() && !done[r.Delta] && r.Status == wire.RCAborted {
			done[r.Delta] = true
		}
		if p.c.last > 0 {
			e, err := s.QueryRC(ctx, session.QueryOptions{Delta: "mpi://rte/" + s.App() + "/rc/" + strconv.Itoa(p.c.last)})
			if err == nil && (e.Status == wire.RCFinalized || e.Status == wire.RCAborted) && done[e.Delta] {
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				say("DONE", map[string]any{"rank": p.me, "size": c.Size()})
				return nil
			}
			if err != nil && !errors.Is(err, wire.ErrNotFound) {
				return err
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// change runs phases 2 and 3 of r over c; it returns the communicator to
// go on with, or errLeft.
func (p *proc) change(ctx context.Context, c *comm.Comm, r session.RC) (*comm.Comm, error) {
	s := p.s
	bound := c.Set().Name
	var newSet session.SetVersion
	root := c.JobRank(0) // the default root: the lowest member
	if p.c.rootLast {
		root = c.JobRank(c.Size() - 1)
	}
	if p.me == root {
		op := session.OpUnion
		if r.Type == wire.RCSub {
			op = session.OpDifference
		}
		res, err := s.PsetOp(ctx, op, bound, r.Delta, session.PsetOpOptions{Target: bound})
		switch {
		case err == nil:
			newSet = res.Ref()
		case !errors.Is(err, wire.ErrAborted):
			return nil, fmt.Errorf("%s(%s, %s): %w", op, bound, r.Delta, err)
		}
	}
	if p.me == root && p.c.rootLate && r.Type == wire.RCAdd {
		// The others have long read the change as announced.
		if _, err := s.WaitRC(ctx, session.QueryOptions{Delta: r.Delta}, func(r session.RC) bool { return r.Status == wire.RCAborted }); err != nil {
			return nil, fmt.Errorf("wait for the abort of %s: %w", r.Delta, err)
		}
	}
	// Phase 3 over the communicator; -blocking waits for the request at
	// once, otherwise it is tested after every update of a change.
	req := s.Accept(ctx, r.Delta, session.AcceptOptions{Bound: bound, NewSet: newSet, Over: c, Root: &root})
	acc, err := p.finish(ctx, req)
	if errors.Is(err, wire.ErrAborted) {
		// The old communicator goes on.
		if _, err := allreduceCheck(ctx, c, 1); err != nil {
			return nil, fmt.Errorf("after the abort of %s: %w", r.Delta, err)
		}
		say("STATE", map[string]any{"rank": p.me, "delta": r.Delta, "status": wire.RCAborted, "size": c.Size()})
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("accept %s: %w", r.Delta, err)
	}
	if acc.Terminate {
		say("LEFT", map[string]any{"rank": p.me, "delta": r.Delta})
		return nil, errLeft
	}
	next, err := p.settle(ctx, acc.NewSet, r.Delta, wire.RCFinalized)
	if err != nil {
		return nil, err
	}
	if r.Type == wire.RCSub {
		if err := survivors(ctx, c, next); err != nil {
			return nil, err
		}
	}
	if err := c.Free(ctx); err != nil {
		return nil, err
	}
	return next, nil
}

// settle builds the communicator over set and reports it.
func (p *proc) settle(ctx context.Context, set wire.PsetRef, delta, status string) (*comm.Comm, error) {
	c, err := p.e.New(ctx, set, "main")
	if err != nil {
		return nil, err
	}
	sum, err := allreduceCheck(ctx, c, 1)
	if err != nil {
		return nil, err
	}
	ranks := make([]uint32, c.Size())
	for i := range ranks {
		ranks[i] = c.JobRank(i)
	}
	say("STATE", map[string]any{
		"rank": p.me, "delta": delta, "status": status, "size": c.Size(), "sum": sum,
		"crank": c.Rank(), "members": wire.RangesOf(ranks).String(), "set": set.Name, "version": set.Version,
	})
	return c, nil
}

// survivors: over the communicator of before a SUB, every process that
// stays sends its job rank to the old rank 0 (which stays, being the
// lowest), which checks it hears from exactly the new set's members.
func survivors(ctx context.Context, old, next *comm.Comm) error {
	if old.Rank() != 0 {
		return old.Send(ctx, 0, 42, []byte(strconv.Itoa(int(old.JobRank(old.Rank())))))
	}
	var got []int
	for i := range next.Size() {
		jr := next.JobRank(i)
		if jr == old.JobRank(0) {
			continue
		}
		r, ok := old.RankOf(jr)
		if !ok {
			return fmt.Errorf("job rank %d of the new set is not in the old one", jr)
		}
		b, _, err := old.Recv(ctx, r, 42)
		if err != nil {
			return fmt.Errorf("old communicator after a SUB: %w", err)
		}
		v, _ := strconv.Atoi(string(b))
		got = append(got, v)
	}
	if !slices.IsSorted(got) {
		return fmt.Errorf("survivors sent %v", got)
	}
	return nil
}

// benchmark: rank 0 times c.n operations after a warm-up and prints the
// mean per operation.
func (p *proc) benchmark(ctx context.Context) error {
	c, err := p.world(ctx, "bench")
	if err != nil {
		return err
	}
	var op func() error
	switch p.c.bench {
	case "pingpong":
		if c.Size() < 2 {
			return errors.New("pingpong needs 2 processes")
		}
		msg := make([]byte, 8)
		op = func() error {
			switch c.Rank() {
			case 0:
				if err := c.Send(ctx, 1, 0, msg); err != nil {
					return err
				}
				_, _, err := c.Recv(ctx, 1, 0)
				return err
			case 1:
				b, _, err := c.Recv(ctx, 0, 0)
				if err == nil {
					err = c.Send(ctx, 0, 0, b)
				}
				return err
			}
			return nil
		}
	case "barrier":
		op = func() error { return c.Barrier(ctx) }
	case "allreduce":
		in := []float64{float64(c.Rank())}
		op = func() error {
			_, err := comm.Allreduce(ctx, c, comm.Sum, in)
			return err
		}
	default:
		return fmt.Errorf("unknown benchmark %q", p.c.bench)
	}
	for range min(p.c.n, 200) {
		if err := op(); err != nil {
			return err
		}
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	for range p.c.n {
		if err := op(); err != nil {
			return err
		}
	}
	el := time.Since(t0)
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if c.Rank() == 0 {
		say("BENCH", map[string]any{"op": p.c.bench, "n": p.c.n, "size": c.Size(), "tcp": p.c.tcp, "ns": el.Nanoseconds() / int64(p.c.n)})
	}
	return c.Free(ctx)
}

// finish completes an accept: with -blocking it waits at once; otherwise
// it tests the request first (the way a program that goes on working
// would look at it) and then waits.
func (p *proc) finish(ctx context.Context, req *session.AcceptRequest) (session.AcceptResult, error) {
	if !p.c.blocking {
		if res, done, err := req.Test(); done {
			return res, err
		}
	}
	return req.Wait(ctx)
}
