package proc

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Group is a table of running processes keyed by K (for a daemon, a
// (job, rank) pair). A process leaves the table when it has ended, just
// before the group's exit callback runs for it.
type Group[K comparable] struct {
	onExit func(K, *Proc, ExitStatus)

	mu    sync.Mutex
	procs map[K]*Proc // nil value: start in progress
	wg    sync.WaitGroup
}

// NewGroup returns an empty group. onExit, if not nil, is called once for
// every process that ends, from its own goroutine, after Wait returned.
func NewGroup[K comparable](onExit func(key K, p *Proc, st ExitStatus)) *Group[K] {
	return &Group[K]{onExit: onExit, procs: make(map[K]*Proc)}
}

// Start starts a process under key. A key still in use gives wire.ErrExists.
func (g *Group[K]) Start(ctx context.Context, key K, spec Spec) (*Proc, error) {
	g.mu.Lock()
	if _, ok := g.procs[key]; ok {
		g.mu.Unlock()
		return nil, wire.Errorf(wire.ErrExists, "proc: %v is already running", key)
	}
	g.procs[key] = nil // reserve the key while forking without the lock
	g.wg.Add(1)
	g.mu.Unlock()

	p, err := Start(ctx, spec)
	g.mu.Lock()
	if err != nil {
		delete(g.procs, key)
		g.mu.Unlock()
		g.wg.Done()
		return nil, fmt.Errorf("%v: %w", key, err)
	}
	g.procs[key] = p
	g.mu.Unlock()

	go func() {
		defer g.wg.Done()
		st := p.Wait()
		g.mu.Lock()
		delete(g.procs, key)
		g.mu.Unlock()
		if g.onExit != nil {
			g.onExit(key, p, st)
		}
	}()
	return p, nil
}

// Get returns the running process under key.
func (g *Group[K]) Get(key K) (*Proc, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.procs[key]
	return p, p != nil
}

// Len returns how many processes are running (or starting).
func (g *Group[K]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.procs)
}

// matching snapshots the running processes whose key satisfies match (all
// when match is nil).
func (g *Group[K]) matching(match func(K) bool) map[K]*Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[K]*Proc)
	for k, p := range g.procs {
		if p != nil && (match == nil || match(k)) {
			out[k] = p
		}
	}
	return out
}

// Signal sends sig to every matching process group and returns how many
// were signalled.
func (g *Group[K]) Signal(match func(K) bool, sig syscall.Signal) int {
	n := 0
	for _, p := range g.matching(match) {
		if p.Signal(sig) == nil {
			n++
		}
	}
	return n
}

// Terminate terminates every matching process in parallel (see
// Proc.Terminate) and returns their statuses once all have been reaped.
func (g *Group[K]) Terminate(match func(K) bool, grace time.Duration) map[K]ExitStatus {
	procs := g.matching(match)
	out := make(map[K]ExitStatus, len(procs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := p.Terminate(grace)
			mu.Lock()
			out[k] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// Wait blocks until every process started so far has ended and its exit
// callback has returned. Do not call it while another goroutine may still
// call Start (the usual sync.WaitGroup rule).
func (g *Group[K]) Wait() { g.wg.Wait() }
