package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// drive is rank 0: the latency rounds for every k, then the rate run.
func (b *bench) drive(ctx context.Context) error {
	info, err := b.s.PsetInfo(ctx, b.app)
	if err != nil {
		return err
	}
	if info.Size != 1 {
		return wire.Errorf(wire.ErrInvalid, "spawnbench: the job has %d processes; launch it with -n 1", info.Size)
	}
	if b.cur, err = b.ep.New(ctx, wire.PsetRef{Name: b.app, Version: info.Version}, "spawnbench"); err != nil {
		return err
	}
	for _, k := range b.c.ks {
		for r := -b.c.warmup; r < b.c.rounds; r++ {
			line, err := b.grow(ctx, k)
			if err != nil {
				return fmt.Errorf("grow by %d, round %d: %w", k, r, err)
			}
			if b.cur.Size() != k+1 {
				return wire.Errorf(wire.ErrState, "spawnbench: communicator of %d processes after a grow by %d", b.cur.Size(), k)
			}
			if err := b.shrink(ctx); err != nil {
				return fmt.Errorf("shrink after grow by %d, round %d: %w", k, r, err)
			}
			if r >= 0 {
				line["round"] = r
				fmt.Fprintln(b.out, "ROUND", jsonOf(line))
			}
		}
	}
	if b.c.rate > 0 {
		// Seed 003 §5.2: spawn continuously, the spawned processes stay. Here
		// every grow is bound to the whole job, so all the processes added
		// so far take part in it (accept, communicator, barrier), as in a
		// malleable application.
		t0 := time.Now()
		for i := range b.c.rate {
			if _, err := b.grow(ctx, 1); err != nil {
				return fmt.Errorf("rate run, grow %d: %w", i+1, err)
			}
		}
		d := time.Since(t0)
		if b.cur.Size() != b.c.rate+1 {
			return wire.Errorf(wire.ErrState, "spawnbench: communicator of %d processes after %d grows by 1", b.cur.Size(), b.c.rate)
		}
		if err := b.shrink(ctx); err != nil {
			return fmt.Errorf("shrink after the rate run: %w", err)
		}
		fmt.Fprintln(b.out, "RATE", jsonOf(map[string]any{"impl": "dynrt", "n": b.c.rate, "ns": d.Nanoseconds(), "size": b.c.rate + 1}))
	}
	fmt.Fprintln(b.out, "DONE", jsonOf(map[string]any{"impl": "dynrt", "size": b.cur.Size()}))
	return b.cur.Free(ctx)
}

// grow is one timed grow by k at rank 0; the line it returns holds the
// total, the communicator size and the steps, all in ns since the request.
func (b *bench) grow(ctx context.Context, k int) (map[string]any, error) {
	var t growTimes
	t.Request = time.Now().UnixNano()
	rc, err := b.s.RequestRC(ctx, wire.RCAdd, k, session.RequestOptions{})
	if err != nil {
		return nil, fmt.Errorf("request ADD %d: %w", k, err)
	}
	t.Announced = time.Now().UnixNano()
	res, err := b.s.PsetOp(ctx, session.OpUnion, b.app, rc.Delta, session.PsetOpOptions{Target: b.app})
	if err != nil {
		return nil, fmt.Errorf("UNION(%s, %s): %w", b.app, rc.Delta, err)
	}
	t.PsetOp = time.Now().UnixNano()
	gt, sts, err := b.grown(ctx, rc.Delta, res.Ref())
	if err != nil {
		return nil, err
	}
	t.Accepted, t.Comm, t.Barrier = gt.Accepted, gt.Comm, gt.Barrier
	if len(sts) != k {
		return nil, wire.Errorf(wire.ErrState, "spawnbench: times of %d new processes, want %d", len(sts), k)
	}
	// Untimed: the runtime's record of the change, for the breakdown.
	q, err := b.s.QueryRC(ctx, session.QueryOptions{Delta: rc.Delta})
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"impl": "dynrt", "k": k, "ns": t.Barrier - t.Request, "size": b.cur.Size(),
		"steps": steps(t, q.Record.Times, sts),
	}, nil
}

// steps puts rank 0's times, the master's step times and the latest of the
// new processes' times on one axis: ns since the request. Names start with
// the side that took them: r0 (rank 0), m (the master), new (the slowest new
// process).
func steps(t growTimes, m wire.RCTimes, sts []stamps) map[string]int64 {
	rel := func(x int64) int64 {
		if x == 0 {
			return 0
		}
		return x - t.Request
	}
	latest := func(f func(stamps) int64) int64 {
		var x int64
		for _, st := range sts {
			x = max(x, f(st))
		}
		return rel(x)
	}
	return map[string]int64{
		"r0_announced": rel(t.Announced), "r0_psetop": rel(t.PsetOp), "r0_accepted": rel(t.Accepted),
		"r0_comm": rel(t.Comm), "r0_barrier": rel(t.Barrier),
		"m_announced": rel(m.Announced), "m_started": rel(m.Started), "m_accepted": rel(m.Accepted),
		"m_confirmed": rel(m.Confirmed), "m_finalized": rel(m.Finalized),
		"new_main":    latest(func(s stamps) int64 { return s.Start }),
		"new_init":    latest(func(s stamps) int64 { return s.Init }),
		"new_open":    latest(func(s stamps) int64 { return s.Open }),
		"new_confirm": latest(func(s stamps) int64 { return s.Confirm }),
		"new_comm":    latest(func(s stamps) int64 { return s.Comm }),
		"new_barrier": latest(func(s stamps) int64 { return s.Barrier }),
	}
}

// shrink removes every process but rank 0 (SUB, untimed) and waits until
// they are gone and their slots free, so that the next round starts from a
// quiet job.
func (b *bench) shrink(ctx context.Context) error {
	var ranks []uint32
	for r := 1; r < b.cur.Size(); r++ {
		ranks = append(ranks, b.cur.JobRank(r))
	}
	rc, err := b.s.RequestRC(ctx, wire.RCSub, 0, session.RequestOptions{Ranks: ranks, Grace: b.c.grace})
	if err != nil {
		return fmt.Errorf("request SUB %v: %w", ranks, err)
	}
	res, err := b.s.PsetOp(ctx, session.OpDifference, b.app, rc.Delta, session.PsetOpOptions{Target: b.app})
	if err != nil {
		return fmt.Errorf("DIFFERENCE(%s, %s): %w", b.app, rc.Delta, err)
	}
	if _, err := b.accept(ctx, rc.Delta, res.Ref()); err != nil {
		return fmt.Errorf("accept %s: %w", rc.Delta, err)
	}
	end, err := b.s.WaitRC(ctx, session.QueryOptions{Delta: rc.Delta}, func(x session.RC) bool {
		return x.Record.Settled || x.Status == wire.RCAborted
	})
	if err != nil {
		return err
	}
	if end.Status == wire.RCAborted {
		return wire.Errorf(wire.ErrAborted, "spawnbench: shrink %s aborted: %s", rc.Delta, end.Record.Reason)
	}
	old := b.cur
	if b.cur, err = b.ep.New(ctx, wire.PsetRef{Name: res.Name, Version: res.Version}, "spawnbench"); err != nil {
		return err
	}
	return old.Free(ctx)
}
