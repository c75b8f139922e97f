package master

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// state is everything the master knows. Only the loop goroutine touches
// it: request handlers post closures (post, ask), and work that waits on
// the network (calls to daemons) runs in goroutines that post their result
// back. Nothing here blocks.
type state struct {
	m       *Master
	log     *slog.Logger
	id      string
	token   string
	started time.Time

	alloc      *alloc.Alloc
	nodes      []*node          // by index
	nodeByName map[string]*node //
	registered int              // nodes of the start that have registered at least once
	initial    int              // nodes of the start (grow.go adds more later)
	allUp      chan struct{}    // closed once every node of the start has registered

	peers map[*wire.Conn]*peer // tool connections the master keeps state for

	jobs    map[string]*job // by namespace, live and recently ended
	order   []*job          // same jobs, oldest first
	apps    map[string]bool // app names of live jobs
	lastJob uint32          // job number counter
	live    int             // jobs not yet ended

	bus bus
	rc  *rcState // resource changes and ordered pushes (rc.go, psetop.go)
	pmi pmiState // PMI service (pmi.go)

	stopping bool
	drained  chan struct{} // closed when stopping and no job is live

	nodeLog   []wire.Event // the latest node.added/leaving/removed events (DVMState.NodeLog)
	misplaced int          // processes placed on a node that is not fully in the DVM (must stay 0; grow.go)
}

// post queues f to run on the loop. It returns false once the loop has
// ended (f then never runs). It may block while the queue is full, so the
// loop itself must never call it: loop code calls state methods directly.
func (m *Master) post(f func(*state)) bool {
	select {
	case m.ops <- f:
		return true
	case <-m.loopDone:
		return false
	}
}

// errStopped is returned to requests that arrive after the loop ended.
var errStopped = wire.Errorf(wire.ErrClosed, "master: the DVM has stopped")

type result[T any] struct {
	v   T
	err error
}

// ask runs f on the loop and waits for the answer f gives through reply,
// which may be called later (from the loop or any goroutine; only the
// first call counts). It returns early when ctx ends.
func ask[T any](ctx context.Context, m *Master, f func(s *state, reply func(T, error))) (T, error) {
	ch := make(chan result[T], 1)
	reply := func(v T, err error) {
		select {
		case ch <- result[T]{v, err}:
		default:
		}
	}
	var zero T
	if !m.post(func(s *state) { f(s, reply) }) {
		return zero, errStopped
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return zero, wire.Errorf(wire.ErrTimeout, "master: %w", ctx.Err())
		}
		return zero, wire.Errorf(wire.ErrCanceled, "master: %w", ctx.Err())
	case <-m.loopDone:
		select {
		case r := <-ch:
			return r.v, r.err
		default:
			return zero, errStopped
		}
	}
}

// do runs f on the loop and waits for it to return.
func do(ctx context.Context, m *Master, f func(s *state) error) error {
	_, err := ask(ctx, m, func(s *state, reply func(struct{}, error)) { reply(struct{}{}, f(s)) })
	return err
}

// run is the loop.
func (m *Master) run() {
	defer close(m.loopDone)
	for {
		select {
		case f := <-m.ops:
			f(m.st)
		case <-m.quit:
			return
		}
	}
}
