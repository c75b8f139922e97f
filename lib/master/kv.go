package master

import (
	"context"
	"sync"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// kv.fetch routing. Committed data stays on the daemon of the owner's node,
// so the master's directory of who holds which rank's data is its process
// table: a fetch is sent on to the daemon(s) where the owners run (or ran:
// a daemon keeps the data of an exited process until its job ends).

// fetchTarget is the part of a fetch one daemon answers.
type fetchTarget struct {
	conn  *wire.Conn
	node  string
	procs map[string]wire.RankRanges
	rep   wire.KVFetchReply
	err   error
}

func (ss *sessState) handleFetch(ctx context.Context, _ *wire.Request, b *wire.KVFetchReq) (any, error) {
	// Without a wait, a stuck daemon must not hold the requester forever.
	ms := b.TimeoutMS
	if ms == 0 && !b.Wait {
		ms = ss.m.callTimeout.Milliseconds()
	}
	ctx, cancel := ctxTimeout(ctx, ms)
	defer cancel()
	targets, err := ask(ctx, ss.m, func(s *state, reply func([]*fetchTarget, error)) {
		reply(s.fetchTargets(b.Procs))
	})
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for _, t := range targets[min(1, len(targets)):] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.call(ctx, b, msLeft(ctx))
		}()
	}
	if len(targets) > 0 {
		targets[0].call(ctx, b, msLeft(ctx))
	}
	wg.Wait()
	out := &wire.KVFetchReply{}
	for _, t := range targets {
		if t.err != nil {
			return nil, t.err
		}
		out.Data = append(out.Data, t.rep.Data...)
	}
	return out, nil
}

func (t *fetchTarget) call(ctx context.Context, b *wire.KVFetchReq, ms int64) {
	body := &wire.KVFetchReq{Key: b.Key, Wait: b.Wait, TimeoutMS: ms}
	for job, rr := range t.procs {
		body.Procs = append(body.Procs, wire.ProcRanges{Job: job, Ranks: rr})
	}
	t.err = t.conn.Call(ctx, wire.KindKVFetch, body, &t.rep)
}

// fetchTargets groups the owners of a fetch by the daemon that holds their
// data.
func (s *state) fetchTargets(procs []wire.ProcRanges) ([]*fetchTarget, error) {
	byNode := map[int]*fetchTarget{}
	var out []*fetchTarget
	for _, pr := range procs {
		j, err := s.job(pr.Job)
		if err != nil {
			return nil, err
		}
		for r := range pr.Ranks.All() {
			p := j.procs.at(r)
			if p == nil {
				return nil, wire.Errorf(wire.ErrNotFound, "master: job %s has no rank %d", j.ns, r)
			}
			n := s.nodes[p.node]
			if !n.up {
				return nil, wire.Errorf(wire.ErrNotFound, "master: the data of rank %d of job %s was on node %s, which is down", r, j.ns, n.name)
			}
			t := byNode[n.idx]
			if t == nil {
				t = &fetchTarget{conn: n.conn, node: n.name, procs: map[string]wire.RankRanges{}}
				byNode[n.idx] = t
				out = append(out, t)
			}
			t.procs[j.ns] = t.procs[j.ns].Add(r)
		}
	}
	return out, nil
}

// msLeft is the time left until ctx's deadline in ms (at least 1), or 0
// without a deadline.
func msLeft(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(dl).Milliseconds(), 1)
}
